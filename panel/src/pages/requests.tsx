/**
 * The request log, newest first, refreshed every few seconds, found by status, endpoint, request
 * id, Idempotency-Key, a target's status code and when it was received.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
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
  const [filter, setFilter] = useState<Filter>(noFilter);
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

/** A filter as its form holds it: each text as typed, empty for "any". */
export interface Filter {
  status: RequestStatus | undefined;
  /** "{line}/{endpoint}". */
  endpoint: string;
  requestId: string;
  idempotencyKey: string;
  /** An HTTP status code a target answered. */
  targetStatus: string;
  /** Local date and time (a datetime-local input's value). */
  receivedFrom: string;
  receivedTo: string;
}

export const noFilter: Filter = {
  status: undefined,
  endpoint: "",
  requestId: "",
  idempotencyKey: "",
  targetStatus: "",
  receivedFrom: "",
  receivedTo: "",
};

const localTime = (value: string) => timestampFromDate(new Date(value));

/** The API's filter; a malformed status code goes as 0, so the API's message names the field. */
export const filterInit = (filter: Filter): Partial<RequestFilter> => ({
  ...(filter.status !== undefined && { status: filter.status }),
  ...(filter.endpoint.trim() && { endpoint: filter.endpoint.trim() }),
  ...(filter.requestId.trim() && { requestId: filter.requestId.trim() }),
  ...(filter.idempotencyKey && { idempotencyKey: filter.idempotencyKey }),
  ...(filter.targetStatus.trim() && {
    targetStatus: Number.parseInt(filter.targetStatus, 10) || 0,
  }),
  ...(filter.receivedFrom && { receivedFrom: localTime(filter.receivedFrom) }),
  ...(filter.receivedTo && { receivedTo: localTime(filter.receivedTo) }),
});

/** The filter's typed fields: its name in the API, its label, its input's type and a hint. */
const textFilters = [
  { name: "endpoint", label: "Endpoint", type: "text", hint: "line/endpoint, such as v1/orders" },
  { name: "requestId", label: "Request id", type: "text" },
  { name: "idempotencyKey", label: "Idempotency-Key", type: "text" },
  {
    name: "targetStatus",
    label: "Target status",
    type: "number",
    hint: "a status code a target answered, such as 503",
  },
  { name: "receivedFrom", label: "Received from", type: "datetime-local" },
  { name: "receivedTo", label: "Received before", type: "datetime-local" },
] as const satisfies { name: keyof Filter; label: string; type: string; hint?: string }[];

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
  const [texts, setTexts] = useState<Omit<Filter, "status">>(noFilter);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    onApply({ ...texts, status: status === "" ? undefined : (Number(status) as RequestStatus) });
  };
  return (
    <form className="filters row" onSubmit={submit} aria-label="Filter requests" noValidate>
      <FilterFields
        statuses={statuses}
        anyStatus="any"
        status={status}
        onStatus={setStatus}
        fields={textFilters}
        values={texts}
        onValues={setTexts}
        problem={problem}
      />
      <button type="submit">Apply filters</button>
    </form>
  );
}

/** A filter form's fields: a status to pick (`anyStatus` names none) and typed texts. */
export function FilterFields<Name extends string>(props: {
  statuses: RequestStatus[];
  anyStatus: string;
  status: string;
  onStatus: (status: string) => void;
  fields: readonly { name: Name; label: string; type: string; hint?: string }[];
  values: Record<Name, string>;
  onValues: (values: Record<Name, string>) => void;
  problem: Problem | null;
}) {
  const { values, problem } = props;
  return (
    <>
      <Field label="Status" error={fieldError(problem, "status")}>
        {(control) => (
          <select
            {...control}
            name="status"
            value={props.status}
            onChange={(e) => props.onStatus(e.target.value)}
          >
            <option value="">{props.anyStatus}</option>
            {props.statuses.map((s) => (
              <option key={s} value={s}>
                {requestStatusNames[s]}
              </option>
            ))}
          </select>
        )}
      </Field>
      {props.fields.map((f) => (
        <Field key={f.name} label={f.label} hint={f.hint} error={fieldError(problem, f.name)}>
          {(control) => (
            <input
              {...control}
              name={f.name}
              type={f.type}
              {...(f.type === "datetime-local" && { step: 1 })}
              value={values[f.name]}
              onChange={(e) => props.onValues({ ...values, [f.name]: e.target.value })}
            />
          )}
        </Field>
      ))}
    </>
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
