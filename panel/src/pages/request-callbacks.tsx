/**
 * A request's completion callbacks (`Relay-Callback`, `Relay-Failure-Callback`): per target and
 * run, where it went and how its last try went.
 */
import type { Request } from "../../../gen/relay/v1/requests_pb.ts";
import { formatTime } from "../model.ts";

export function RequestCallbacks({ request }: { request: Request }) {
  if (request.callbacks.length === 0) return null;
  const names = new Map(request.attempts.map((a) => [a.targetId, a.targetName]));
  return (
    <section className="card" aria-label="Callbacks">
      <h2>Callbacks</h2>
      <ul className="plain" data-testid="request-callbacks">
        {request.callbacks.map((c) => (
          <li key={`${c.targetId}-${c.replay}`}>
            <strong>{names.get(c.targetId) ?? c.targetId}</strong>
            {c.replay > 0 && ` (replay ${c.replay})`}{" "}
            {c.kind === "delivered" ? "delivered" : "failed"}, told to <code>{c.url}</code>:{" "}
            {c.sent
              ? `sent (HTTP ${c.statusCode})`
              : `${c.statusCode !== undefined ? `HTTP ${c.statusCode}` : (c.error ?? "no answer")}, tried again`}{" "}
            <span className="muted">
              · {c.tries} {c.tries === 1 ? "try" : "tries"}, the last {formatTime(c.updatedAt)}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}
