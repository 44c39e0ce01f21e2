/**
 * Recovery jobs: a replay of many finished requests by filter, planned first (a dry run says how
 * many and what they cost), then run in the background; each job's progress as a bar, refreshed
 * every second while one runs, and a cancel for a running one.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { type FormEvent, useState } from "react";
import {
  type Recovery,
  type RecoveryFilter,
  RecoveryService,
  RecoveryState,
} from "../../../gen/relay/v1/recoveries_pb.ts";
import { RequestLogService, RequestStatus } from "../../../gen/relay/v1/requests_pb.ts";
import { problemOf } from "../errors.ts";
import { formatTime } from "../model.ts";
import { useInvalidate, useProject } from "../project.ts";
import { ConfirmButton, FormError, Loaded, StatusBadge } from "../ui.tsx";
import { FilterFields } from "./requests.tsx";

const stateNames: Record<RecoveryState, string> = {
  [RecoveryState.UNSPECIFIED]: "unknown",
  [RecoveryState.RUNNING]: "running",
  [RecoveryState.COMPLETED]: "completed",
  [RecoveryState.CANCELLED]: "cancelled",
  [RecoveryState.FAILED]: "failed",
};

const finishedStatuses = [
  RequestStatus.FAILED,
  RequestStatus.PARTIALLY_FAILED,
  RequestStatus.DELIVERED,
  RequestStatus.CANCELLED,
  RequestStatus.SKIPPED,
];

const texts = [
  { name: "endpoint", label: "Endpoint", type: "text", hint: "line/endpoint; empty: every one" },
  { name: "target", label: "Target id", type: "text", hint: "Only requests it did not get" },
  { name: "since", label: "Received from", type: "datetime-local" },
  { name: "until", label: "Received before", type: "datetime-local" },
] as const;
type Texts = Record<(typeof texts)[number]["name"], string>;

export function RecoveriesPage() {
  const { project, token } = useProject();
  const jobs = useQuery(
    RecoveryService.method.listRecoveries,
    { project },
    {
      refetchInterval: (query) =>
        query.state.data?.recoveries.some((r) => r.state === RecoveryState.RUNNING) ? 1000 : false,
    },
  );
  return (
    <>
      <p>
        A recovery job replays every finished request that matches, in the background: each replay
        is charged and keeps the target's flow control, as a replay from the failure queue. Try it
        as a dry run first.
      </p>
      <RecoveryForm />
      <Loaded query={jobs} token={token}>
        {({ recoveries }) => <RecoveryTable recoveries={recoveries} />}
      </Loaded>
    </>
  );
}

function RecoveryForm() {
  const { project } = useProject();
  const [status, setStatus] = useState("");
  const [values, setValues] = useState<Texts>({ endpoint: "", target: "", since: "", until: "" });
  const [planned, setPlanned] = useState<string>("");
  const invalidate = useInvalidate(RecoveryService, RequestLogService);
  const filter = (): Partial<RecoveryFilter> => ({
    ...(status && { status: Number(status) as RequestStatus }),
    ...(values.endpoint && { endpoint: values.endpoint }),
    ...(values.target && { target: values.target }),
    ...(values.since && { since: timestampFromDate(new Date(values.since)) }),
    ...(values.until && { until: timestampFromDate(new Date(values.until)) }),
  });
  const start = useMutation(RecoveryService.method.startRecovery, {
    onSuccess: async ({ result }) => {
      if (result.case === "plan") {
        const { matched, credits } = result.value;
        setPlanned(
          `${matched} request${matched === 1 ? "" : "s"} would be replayed, for ${credits} credit${credits === 1n ? "" : "s"}.`,
        );
      } else {
        setPlanned("");
        await invalidate();
      }
    },
  });
  const problem = start.error ? problemOf(start.error) : null;
  const submit = (dryRun: boolean) => (event?: FormEvent) => {
    event?.preventDefault();
    start.mutate({ project, filter: filter(), dryRun });
  };
  return (
    <form className="filters row" onSubmit={submit(true)} aria-label="Recovery" noValidate>
      <FilterFields
        statuses={finishedStatuses}
        anyStatus="failed and partially failed"
        status={status}
        onStatus={setStatus}
        fields={texts}
        values={values}
        onValues={setValues}
        problem={problem}
      />
      <button type="submit" disabled={start.isPending}>
        Dry run
      </button>
      <ConfirmButton
        label="Start recovery"
        question="Replay every request that matches, in the background?"
        confirmLabel="Yes, start it"
        disabled={start.isPending}
        onConfirm={() => submit(false)()}
      />
      <p role="status" className="saved">
        {planned}
      </p>
      <FormError problem={problem} />
    </form>
  );
}

function RecoveryTable({ recoveries }: { recoveries: Recovery[] }) {
  const { project } = useProject();
  const invalidate = useInvalidate(RecoveryService, RequestLogService);
  const cancel = useMutation(RecoveryService.method.cancelRecovery, {
    onSuccess: () => invalidate(),
  });
  if (recoveries.length === 0) return <p>No recovery job yet.</p>;
  return (
    <>
      <FormError problem={cancel.error ? problemOf(cancel.error) : null} />
      <table className="recoveries">
        <caption className="visually-hidden">Recovery jobs</caption>
        <thead>
          <tr>
            <th scope="col">Started</th>
            <th scope="col">Job</th>
            <th scope="col">State</th>
            <th scope="col">Progress</th>
            <th scope="col">Sent / failed / skipped / running</th>
            <th scope="col">
              <span className="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {recoveries.map((r) => {
            const done = r.sent + r.failed + r.skipped;
            return (
              <tr key={r.recoveryId}>
                <td>{formatTime(r.createdAt)}</td>
                <td>
                  <code>{r.recoveryId}</code>
                  {r.endpoint && <> · {r.endpoint}</>}
                  {r.error && <p className="field-error">{r.error}</p>}
                </td>
                <td>
                  <StatusBadge status={stateNames[r.state]} />
                </td>
                <td>
                  <progress
                    value={done}
                    max={Math.max(r.matched, 1)}
                    aria-label={`${r.recoveryId}: ${done} of ${r.matched}`}
                  />{" "}
                  {done} of {r.matched}
                </td>
                <td>
                  {r.sent} / {r.failed} / {r.skipped} / {r.running}
                </td>
                <td>
                  {r.state === RecoveryState.RUNNING && (
                    <button
                      type="button"
                      disabled={cancel.isPending}
                      onClick={() => cancel.mutate({ project, recoveryId: r.recoveryId })}
                      aria-label={`Cancel ${r.recoveryId}`}
                    >
                      Cancel
                    </button>
                  )}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </>
  );
}
