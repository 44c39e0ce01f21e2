/**
 * "Try a filter or transformation" on a request's page: the endpoint's targets as they are now,
 * each with whether its filter matches this request as logged and, when it has a transformation,
 * what that makes of the call; then a filter and a transformation to write and try on it. Filters
 * match in the browser (./filter-trial.tsx); transformations run in the control plane's sandbox
 * (./transform-trial.tsx). Nothing is sent to a target and nothing is saved.
 */
import { useQuery } from "@connectrpc/connect-query";
import { useMemo } from "react";
import { fromBase64 } from "../../../core/base64.ts";
import { type FilterInput, filterInput, matchesFilter } from "../../../core/filter.ts";
import { BodyEncoding, type Request } from "../../../gen/relay/v1/requests_pb.ts";
import { EndpointService, type Target } from "../../../gen/relay/v1/routing_pb.ts";
import { problemOf } from "../errors.ts";
import { projectPath, useProject } from "../project.ts";
import { Link } from "../router.tsx";
import { StatusBadge } from "../ui.tsx";
import { FilterTrial, firstFilterText } from "./filter-trial.tsx";
import { TransformOutcome, TransformTrial, targetInput } from "./transform-trial.tsx";

const utf8Encoder = new TextEncoder();

/** The request as logged: its forwarded headers (lowercase names) and its body's bytes. */
interface LoggedCall {
  headers: Record<string, string>;
  body: Uint8Array;
}

function loggedCall({ body, headers }: Request): LoggedCall {
  const bytes =
    body?.encoding === BodyEncoding.BASE64
      ? fromBase64(body.text)
      : utf8Encoder.encode(body?.text ?? "");
  return { headers: headers?.values ?? {}, body: bytes };
}

/** For a request whose log kept its headers or body (the page shows it only then). */
export function TryConsole({ request }: { request: Request }) {
  const { project } = useProject();
  const endpoint = useQuery(EndpointService.method.getEndpoint, {
    project,
    line: request.line,
    path: request.endpoint,
  });
  const unread = endpoint.error ? problemOf(endpoint.error) : null;
  const logged = useMemo(() => loggedCall(request), [request]);
  const filterSees = useMemo(() => filterInput(logged.body, new Headers(logged.headers)), [logged]);
  const targets = endpoint.data?.endpoint?.targets;
  return (
    <section className="card" aria-label="Try a filter or transformation">
      <h2>Try a filter or transformation</h2>
      <p className="hint">
        On this request as logged: filters run here, transformations in the sandbox deliveries use;
        nothing is sent to a target or saved. Saving either is on the{" "}
        <Link to={projectPath(project, "endpoints", request.line, request.endpoint)}>
          endpoint's page
        </Link>
        .
      </p>
      {targets ? (
        <TargetVerdicts targets={targets} logged={logged} filterSees={filterSees} />
      ) : unread ? (
        <p className="muted">
          {unread.kind === "not-found"
            ? `${request.line}/${request.endpoint} no longer exists: it has no targets to show.`
            : `Its targets could not be read: ${unread.message}`}
        </p>
      ) : (
        <p className="loading" role="status">
          Loading…
        </p>
      )}
      {(targets || unread) && (
        // Keyed: another request's page starts from its own endpoint's filter.
        <FilterTrial
          key={request.requestId}
          initial={firstFilterText(targets ?? [])}
          logged={filterSees}
        />
      )}
      {targets && targets.length > 0 && (
        <TransformTrial key={request.requestId} targets={targets} logged={logged} />
      )}
    </section>
  );
}

/**
 * Each target as it is now: its filter and whether that takes this request, and what its
 * transformation, if it has one, makes of it (run only when the filter takes it, as a delivery).
 */
function TargetVerdicts({
  targets,
  logged,
  filterSees,
}: {
  targets: Target[];
  logged: LoggedCall;
  filterSees: FilterInput;
}) {
  return (
    <ul className="plain" data-testid="filter-targets">
      {targets.map((t) => {
        const matches = !t.filter || matchesFilter(t.filter, filterSees);
        return (
          <li key={t.id} data-target={t.name}>
            <strong>{t.name}</strong>:{" "}
            {t.filter ? <code>{JSON.stringify(t.filter)}</code> : "no filter: every call"}{" "}
            <StatusBadge status={matches ? "matches" : "skips it"} />
            {t.transform && (
              <div className="target-transform" data-testid="target-transform">
                <details>
                  <summary>Its transformation</summary>
                  <pre className="code">{t.transform}</pre>
                </details>
                {matches ? (
                  <TransformOutcome source={t.transform} input={targetInput(t, logged)} />
                ) : (
                  <p className="muted">not run: its filter skips this call</p>
                )}
              </div>
            )}
          </li>
        );
      })}
    </ul>
  );
}
