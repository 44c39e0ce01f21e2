/**
 * An endpoint's delivery control: each target's circuit (closed, open or disabled), its pause,
 * its run of failures, its flow limits, the deliveries waiting for it (whatever holds them) and
 * its last events; a pause and a resume for one target or the whole endpoint, and an enable for a
 * target its circuit holds.
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { useMutation, useQuery } from "@connectrpc/connect-query";
import {
  type CircuitEvent,
  CircuitState,
  DeliveryControlService,
  type TargetCircuit,
} from "../../../gen/relay/v1/circuits_pb.ts";
import type { Target } from "../../../gen/relay/v1/routing_pb.ts";
import { problemOf } from "../errors.ts";
import { circuitStateNames, formatTime } from "../model.ts";
import { useInvalidate, useProject } from "../project.ts";
import { FormError, Loaded, StatusBadge } from "../ui.tsx";
import { refreshMs } from "./requests.tsx";

/**
 * A target worth following: probes and drains move an open or disabled circuit, waiting
 * deliveries come and go (a paused target's pile up), and a run of failures may open it.
 */
const watched = (t: TargetCircuit) =>
  t.state !== CircuitState.CLOSED ||
  t.paused ||
  t.endpointPaused ||
  t.waiting > 0 ||
  t.failures > 0;

/** A target's flow limits as read: "20/s, 5 at once", or "none". */
function limitsOf(target: Target | undefined): string {
  const limits = [
    target?.maxDeliveriesPerSecond && `${target.maxDeliveriesPerSecond}/s`,
    target?.maxConcurrent && `${target.maxConcurrent} at once`,
  ].filter(Boolean);
  return limits.length > 0 ? limits.join(", ") : "none";
}

export function DeliveryControl({
  line,
  path,
  targets: settings,
}: {
  line: string;
  path: string;
  /** The endpoint's targets as saved, for their flow limits. */
  targets: Target[];
}) {
  const { project, token } = useProject();
  const endpoint = { project, line, path };
  const circuits = useQuery(DeliveryControlService.method.getCircuits, endpoint, {
    refetchInterval: (q) => (q.state.data?.targets.some(watched) ? refreshMs : false),
  });
  const invalidate = useInvalidate(DeliveryControlService);
  // Each answer holds the circuits after the change, but the table reads only the query, which
  // loads them again.
  const refresh = { onSuccess: () => invalidate() };
  const pauseEndpoint = useMutation(DeliveryControlService.method.pauseEndpoint, refresh);
  const resumeEndpoint = useMutation(DeliveryControlService.method.resumeEndpoint, refresh);
  const pauseTarget = useMutation(DeliveryControlService.method.pauseTarget, refresh);
  const resumeTarget = useMutation(DeliveryControlService.method.resumeTarget, refresh);
  const enableTarget = useMutation(DeliveryControlService.method.enableTarget, refresh);
  const actions = [pauseEndpoint, resumeEndpoint, pauseTarget, resumeTarget, enableTarget];
  const busy = actions.some((a) => a.isPending);
  const failed = actions.find((a) => a.error)?.error;
  return (
    <section className="card" aria-labelledby="delivery-control">
      <h2 id="delivery-control">Delivery control</h2>
      <p className="hint">
        A target that keeps failing has its circuit opened: its deliveries wait while one probe at a
        time tries it, and go once it answers. Open too long, it is disabled until enabled here
        (enabling an open one closes it at once). A pause holds deliveries until resumed; the
        endpoint's pause and a target's own are separate, each lifted by its own resume. Deliveries
        over a target's flow limits wait as well, and go in the order they came in as it frees.
      </p>
      <p>
        <button type="button" disabled={busy} onClick={() => pauseEndpoint.mutate(endpoint)}>
          Pause the whole endpoint
        </button>{" "}
        <button type="button" disabled={busy} onClick={() => resumeEndpoint.mutate(endpoint)}>
          Resume the whole endpoint
        </button>
      </p>
      <FormError problem={failed ? problemOf(failed) : null} />
      <Loaded query={circuits} token={token}>
        {({ targets }) => (
          <table>
            <caption className="visually-hidden">Each target's circuit</caption>
            <thead>
              <tr>
                <th scope="col">Target</th>
                <th scope="col">Circuit</th>
                <th scope="col">Paused</th>
                <th scope="col">Failures in a row</th>
                <th scope="col">Opened</th>
                <th scope="col">Flow limits</th>
                <th scope="col">Waiting</th>
                <th scope="col">Last events</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {targets.map((t) => {
                const target = { ...endpoint, target: t.targetName };
                return (
                  <tr key={t.targetId} data-target={t.targetName}>
                    <th scope="row">{t.targetName}</th>
                    <td data-testid="circuit-state">
                      <StatusBadge status={circuitStateNames[t.state]} />
                    </td>
                    <td data-testid="circuit-paused">
                      {t.paused && <StatusBadge status="paused" />}
                      {t.endpointPaused && <StatusBadge status="endpoint paused" />}
                      {!t.paused && !t.endpointPaused && "no"}
                    </td>
                    <td>{t.failures}</td>
                    <td>{formatTime(t.openedAt)}</td>
                    <td data-testid="flow-limits">
                      {limitsOf(settings.find((s) => s.id === t.targetId))}
                    </td>
                    <td data-testid="circuit-waiting">{t.waiting}</td>
                    <td>
                      <Events events={t.events} />
                    </td>
                    <td className="actions">
                      {t.paused ? (
                        <button
                          type="button"
                          disabled={busy}
                          onClick={() => resumeTarget.mutate(target)}
                          aria-label={`Resume ${t.targetName}`}
                        >
                          Resume
                        </button>
                      ) : (
                        <button
                          type="button"
                          disabled={busy}
                          onClick={() => pauseTarget.mutate(target)}
                          aria-label={`Pause ${t.targetName}`}
                        >
                          Pause
                        </button>
                      )}
                      {t.state !== CircuitState.CLOSED && (
                        <button
                          type="button"
                          disabled={busy}
                          onClick={() => enableTarget.mutate(target)}
                          aria-label={`Enable ${t.targetName}`}
                        >
                          Enable
                        </button>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </Loaded>
    </section>
  );
}

/** A circuit's last events, newest first: "probe failed · 2 Jan 2025, 03:04:05". */
function Events({ events }: { events: CircuitEvent[] }) {
  if (events.length === 0) return <span className="muted">none</span>;
  return (
    <ol className="plain">
      {events.map((e) => (
        <li key={`${e.event}-${e.at ? timestampMs(e.at) : ""}`}>
          {e.event.replace("_", " ")} · {formatTime(e.at)}
        </li>
      ))}
    </ol>
  );
}
