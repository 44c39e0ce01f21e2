/**
 * One request: its status, its headers and body as received and, per target, every attempt on a
 * timeline (when it started, what the target answered, how long it took, the error) with the
 * answer beside it, a link to its workflow in the Temporal UI, its trace id, a replay once it
 * finished, "send again" as a new request, a cancel while it waits (scheduled, or between
 * attempts), erasing its content once it finished, the targets it waits for (an open circuit, a disabled target, a pause) with why,
 * the targets it skipped (their filters do not match it, or their transformations dropped it),
 * its completion callbacks and how each went,
 * and a console to try filters and transformations on it.
 */
import { timestampMs } from "@bufbuild/protobuf/wkt";
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { classifyStatus } from "../../../core/delivery.ts";
import { ProjectService } from "../../../gen/relay/v1/projects_pb.ts";
import { FailureQueueService } from "../../../gen/relay/v1/recoveries_pb.ts";
import {
  type Attempt,
  RequestLogService,
  RequestStatus,
} from "../../../gen/relay/v1/requests_pb.ts";
import { problemOf } from "../errors.ts";
import { finished, formatTime, requestStatusNames } from "../model.ts";
import { projectPath, useInvalidate, useProject } from "../project.ts";
import { Link } from "../router.tsx";
import { requestWorkflowsUrl } from "../temporal-ui.ts";
import { FormError, Loaded, StatusBadge } from "../ui.tsx";
import { RequestCallbacks } from "./request-callbacks.tsx";
import { AnswerContent, ReceivedContent } from "./request-content.tsx";
import { refreshMs } from "./requests.tsx";
import { SendAgain } from "./send-again.tsx";
import { TryConsole } from "./try-console.tsx";

export function RequestPage({ requestId }: { requestId: string }) {
  const { project, token } = useProject();
  const request = useQuery(
    RequestLogService.method.getRequest,
    { project, requestId },
    // Follow it while it is still moving; a finished request changes only by a replay.
    {
      refetchInterval: (q) =>
        q.state.data?.request && finished(q.state.data.request.status) ? false : refreshMs,
    },
  );
  const details = useQuery(ProjectService.method.getProject, { project });
  const invalidate = useInvalidate(RequestLogService, FailureQueueService);
  const replay = useMutation(FailureQueueService.method.replayRequest, {
    onSuccess: () => invalidate(),
  });
  const cancel = useMutation(RequestLogService.method.cancelRequest, {
    onSuccess: () => invalidate(),
  });
  return (
    <Loaded query={request} token={token}>
      {({ request }) => {
        if (!request) return null;
        const byTarget = Map.groupBy(request.attempts, (a) => a.targetName);
        const failedSome =
          request.status === RequestStatus.FAILED ||
          request.status === RequestStatus.PARTIALLY_FAILED;
        const canCancel =
          request.status === RequestStatus.SCHEDULED || request.status === RequestStatus.DELIVERING;
        // A call every target skipped was never queued: there is nothing to replay.
        const canReplay =
          finished(request.status) &&
          request.status !== RequestStatus.SKIPPED &&
          !request.contentErasedAt;
        return (
          <>
            <dl className="facts">
              <dt>Request id</dt>
              <dd>
                <code>{request.requestId}</code>
              </dd>
              <dt>Status</dt>
              <dd data-testid="request-status">
                <StatusBadge status={requestStatusNames[request.status]} />
              </dd>
              {request.waiting.length > 0 && (
                <>
                  <dt>Waiting</dt>
                  <dd>
                    <ul className="plain" data-testid="request-waiting">
                      {request.waiting.map((w) => (
                        <li key={w.targetId}>
                          for <strong>{w.targetName}</strong>:{" "}
                          {waitingReasons[w.reason] ?? w.reason} (
                          <Link
                            to={projectPath(project, "endpoints", request.line, request.endpoint)}
                          >
                            delivery control
                          </Link>
                          )
                        </li>
                      ))}
                    </ul>
                  </dd>
                </>
              )}
              {request.skipped.length > 0 && (
                <>
                  <dt>Skipped</dt>
                  <dd>
                    <ul className="plain" data-testid="request-skipped">
                      {request.skipped.map((s) => (
                        <li key={s.targetId}>
                          <strong>{s.targetName}</strong> — skipped:{" "}
                          {skipReasons[s.reason] ?? s.reason}
                        </li>
                      ))}
                    </ul>
                  </dd>
                </>
              )}
              <dt>Endpoint</dt>
              <dd>
                {request.line}/{request.endpoint}
              </dd>
              {request.idempotencyKey !== undefined && (
                <>
                  <dt>Idempotency-Key</dt>
                  <dd>
                    <code>{request.idempotencyKey}</code>
                  </dd>
                </>
              )}
              {request.resentFrom !== undefined && (
                <>
                  <dt>Sent again from</dt>
                  <dd data-testid="request-resent-from">
                    <Link to={projectPath(project, "requests", request.resentFrom)}>
                      <code>{request.resentFrom}</code>
                    </Link>
                  </dd>
                </>
              )}
              <dt>Received</dt>
              <dd>{formatTime(request.receivedAt)}</dd>
              {request.notBefore && (
                <>
                  <dt>Not before</dt>
                  <dd data-testid="request-not-before">{formatTime(request.notBefore)}</dd>
                </>
              )}
              <dt>Body</dt>
              <dd>{request.bodyBytes.toString()} bytes</dd>
              {/* The Temporal UI shows every project's workflows: linked only where the
                  deployment declares it member-safe (otherwise the URL is empty). */}
              {details.data?.workflowsUrl && (
                <>
                  <dt>Workflow</dt>
                  <dd>
                    <a
                      href={requestWorkflowsUrl(details.data.workflowsUrl, request.requestId)}
                      target="_blank"
                      rel="noreferrer"
                    >
                      Open in the Temporal UI
                    </a>
                  </dd>
                </>
              )}
              {request.traceId && (
                <>
                  <dt>Trace</dt>
                  <dd data-testid="request-trace">
                    <code>{request.traceId}</code>
                  </dd>
                </>
              )}
            </dl>
            {canReplay && (
              <p>
                <button
                  type="button"
                  disabled={replay.isPending}
                  onClick={() => replay.mutate({ project, requestId })}
                >
                  Replay
                </button>{" "}
                <span className="hint">
                  {request.status === RequestStatus.DELIVERED
                    ? "Delivers it to every target again, under the same request id."
                    : failedSome
                      ? "Delivers it again to the targets that did not get it."
                      : "Delivers it to its targets after all."}
                </span>
              </p>
            )}
            {replay.isSuccess && (
              <p role="status" className="saved">
                Replay started: its new attempts show below.
              </p>
            )}
            <FormError problem={replay.error ? problemOf(replay.error) : null} />
            {canCancel && (
              <p>
                <button
                  type="button"
                  disabled={cancel.isPending}
                  onClick={() => cancel.mutate({ project, requestId })}
                >
                  Cancel: no further attempts
                </button>
              </p>
            )}
            <FormError problem={cancel.error ? problemOf(cancel.error) : null} />
            <ReceivedContent request={request} />
            {!request.contentErasedAt && <SendAgain key={request.requestId} request={request} />}
            {(request.headers || request.body) && <TryConsole request={request} />}
            <RequestCallbacks request={request} />
            <h2>Attempts</h2>
            {byTarget.size === 0 && (
              <p>
                {request.status === RequestStatus.SKIPPED
                  ? "None: every target skipped this call."
                  : "No attempt yet."}
              </p>
            )}
            {[...byTarget].map(([target, attempts]) => (
              <section key={target} className="card" aria-label={`Target ${target}`}>
                <h3>{target}</h3>
                <Timeline attempts={attempts} />
              </section>
            ))}
          </>
        );
      }}
    </Loaded>
  );
}

/** Why a delivery waits for its target, as the request log names it. */
const waitingReasons: Record<string, string> = {
  circuit_open: "its circuit is open; a probe tries it, and the delivery goes once it answers",
  disabled: "it is disabled (its circuit stayed open too long) until a member enables it",
  paused: "it is paused until a member resumes it",
  throttled: "its flow limits are full; it goes in its turn as the target has room",
};

/** Why a call skipped a target, as the request log names it. */
const skipReasons: Record<string, string> = {
  filter: "its filter does not match this call",
  transform: "its transformation dropped the call",
};

function outcome(a: Attempt): "delivered" | "failed" | "in flight" {
  if (a.statusCode !== undefined && classifyStatus(a.statusCode) === "delivered")
    return "delivered";
  if (a.latencyMs === undefined && a.error === undefined) return "in flight";
  return "failed";
}

/**
 * Attempts in order, each a step with its gap from the first, its answer and its latency. A
 * replay starts a new series, numbered from 1 again.
 */
function Timeline({ attempts }: { attempts: Attempt[] }) {
  const first = attempts[0]?.startedAt ? timestampMs(attempts[0].startedAt) : 0;
  const slowest = Math.max(1, ...attempts.map((a) => a.latencyMs ?? 0));
  return (
    <ol className="timeline">
      {attempts.map((a, i) => {
        const state = outcome(a);
        const replayed = i > 0 && a.attempt <= (attempts[i - 1]?.attempt ?? 0);
        const offset = a.startedAt ? (timestampMs(a.startedAt) - first) / 1000 : 0;
        return (
          <li
            key={`${offset}-${a.attempt}`}
            className={`step step-${state.replace(" ", "-")}`}
            data-outcome={state}
          >
            <div className="step-summary">
              <span className="step-title">
                {replayed ? "Replay, attempt" : "Attempt"} {a.attempt} · {formatTime(a.startedAt)}
                {i > 0 && <span className="muted"> (+{offset.toFixed(1)} s)</span>}
              </span>
              <span className="step-answer">
                {a.statusCode !== undefined ? `HTTP ${a.statusCode}` : "no answer"} · {state}
                {a.latencyMs !== undefined && ` · ${a.latencyMs} ms`}
              </span>
              {a.latencyMs !== undefined && (
                <span
                  className="latency"
                  aria-hidden="true"
                  style={{ width: `${Math.max(4, (a.latencyMs / slowest) * 320)}px` }}
                />
              )}
              {a.error && <span className="step-error">{a.error}</span>}
            </div>
            {a.response && <AnswerContent response={a.response} />}
          </li>
        );
      })}
    </ol>
  );
}
