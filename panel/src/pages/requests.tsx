/** The request log, newest first, refreshed every few seconds, filtered by status and endpoint. */
import { useQuery } from "@connectrpc/connect-query";
import { type FormEvent, type ReactNode, useState } from "react";
import {
  type Request,
  type RequestFilter,
  RequestLogService,
  RequestStatus,
} from "../../../gen/relay/v1/requests_pb.ts";
import { fieldError, type Problem, problemOf } from "../errors.ts";
import { formatTime, requestStatusNames } from "../model.ts";
import { projectPath, useProject } from "../project.ts";
import { Link } from "../router.tsx";
import { Field, Loaded, StatusBadge } from "../ui.tsx";

/** How often the log and the failure queue ask again. */
export const refreshMs = 2000;

export function RequestsPage() {
  const { project, token } = useProject();
  const [filter, setFilter] = useState<Filter>({ status: undefined, endpoint: "" });
  const [cursors, setCursors] = useState<string[]>([]);
  const log = useQuery(
    RequestLogService.method.listRequests,
    { project, filter: filterInit(filter), cursor: cursors.at(-1) ?? "", limit: 25 },
    { refetchInterval: refreshMs, placeholderData: (previous) => previous },
  );
  return (
    <>
      <RequestFilters
        statuses={Object.values(RequestStatus).filter(
          (s): s is RequestStatus => typeof s === "number" && s !== RequestStatus.UNSPECIFIED,
        )}
        problem={log.error ? problemOf(log.error) : null}
        onApply={(next) => {
          setFilter(next);
          setCursors([]);
        }}
      />
      <p className="hint">Live: the list refreshes every {refreshMs / 1000} seconds.</p>
      <Loaded query={log} token={token}>
        {({ requests, nextCursor }) => (
          <>
            <RequestTable project={project} requests={requests} caption="Requests, newest first" />
            <div className="row">
              {cursors.length > 0 && (
                <button type="button" onClick={() => setCursors([])}>
                  Newest
                </button>
              )}
              {nextCursor && (
                <button type="button" onClick={() => setCursors([...cursors, nextCursor])}>
                  Older
                </button>
              )}
            </div>
          </>
        )}
      </Loaded>
    </>
  );
}

export interface Filter {
  status: RequestStatus | undefined;
  /** "{line}/{endpoint}", or empty for every endpoint. */
  endpoint: string;
}

export const filterInit = (filter: Filter): Partial<RequestFilter> => ({
  ...(filter.status !== undefined && { status: filter.status }),
  ...(filter.endpoint.trim() && { endpoint: filter.endpoint.trim() }),
});

/** Filters apply on submit, so a half-typed endpoint is not sent on every key. */
export function RequestFilters({
  statuses,
  problem,
  onApply,
}: {
  statuses: RequestStatus[];
  problem: Problem | null;
  onApply: (filter: Filter) => void;
}) {
  const [status, setStatus] = useState("");
  const [endpoint, setEndpoint] = useState("");
  const submit = (event: FormEvent) => {
    event.preventDefault();
    onApply({ status: status === "" ? undefined : (Number(status) as RequestStatus), endpoint });
  };
  return (
    <form className="filters row" onSubmit={submit} aria-label="Filter requests" noValidate>
      <Field label="Status" error={fieldError(problem, "status")}>
        {(control) => (
          <select
            {...control}
            name="status"
            value={status}
            onChange={(e) => setStatus(e.target.value)}
          >
            <option value="">any</option>
            {statuses.map((s) => (
              <option key={s} value={s}>
                {requestStatusNames[s]}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field
        label="Endpoint"
        hint="line/endpoint, such as v1/orders"
        error={fieldError(problem, "endpoint")}
      >
        {(control) => (
          <input
            {...control}
            name="endpoint"
            value={endpoint}
            onChange={(e) => setEndpoint(e.target.value)}
          />
        )}
      </Field>
      <button type="submit">Apply filters</button>
    </form>
  );
}

export function RequestTable({
  project,
  requests,
  caption,
  actions,
}: {
  project: string;
  requests: Request[];
  caption: string;
  actions?: (request: Request) => ReactNode;
}) {
  if (requests.length === 0) return <p>No requests match.</p>;
  return (
    <table className="requests">
      <caption className="visually-hidden">{caption}</caption>
      <thead>
        <tr>
          <th scope="col">Received</th>
          <th scope="col">Request</th>
          <th scope="col">Endpoint</th>
          <th scope="col">Status</th>
          <th scope="col">Attempts</th>
          <th scope="col">Bytes</th>
          {actions && <th scope="col">Actions</th>}
        </tr>
      </thead>
      <tbody>
        {requests.map((r) => {
          const status = requestStatusNames[r.status];
          return (
            <tr key={r.requestId} data-request-id={r.requestId} data-status={status}>
              <td>{formatTime(r.receivedAt)}</td>
              <td>
                <Link to={projectPath(project, "requests", r.requestId)}>
                  <code>{r.requestId}</code>
                </Link>
              </td>
              <td>
                {r.line}/{r.endpoint}
              </td>
              <td>
                <StatusBadge status={status} />
              </td>
              <td>{r.attempts.length}</td>
              <td>{r.bodyBytes.toString()}</td>
              {actions && <td className="actions">{actions(r)}</td>}
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}
