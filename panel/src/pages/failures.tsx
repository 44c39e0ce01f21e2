/** The failure queue: failed and partially failed requests, replayed one by one or all at once. */
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState } from "react";
import { FailureQueueService } from "../../../gen/relay/v1/recoveries_pb.ts";
import { RequestLogService, RequestStatus } from "../../../gen/relay/v1/requests_pb.ts";
import { problemOf } from "../errors.ts";
import { projectPath, useInvalidate, useProject } from "../project.ts";
import { Link } from "../router.tsx";
import { ConfirmButton, FormError, Loaded } from "../ui.tsx";
import {
  type Filter,
  filterInit,
  noFilter,
  RequestFilters,
  RequestTable,
  refreshMs,
} from "./requests.tsx";

export function FailuresPage() {
  const { project, token } = useProject();
  const [filter, setFilter] = useState<Filter>(noFilter);
  const failures = useQuery(
    FailureQueueService.method.listFailures,
    { project, filter: filterInit(filter), limit: 50 },
    { refetchInterval: refreshMs },
  );
  const invalidate = useInvalidate(FailureQueueService, RequestLogService);
  const [outcome, setOutcome] = useState("");
  const [job, setJob] = useState("");
  const replay = useMutation(FailureQueueService.method.replayRequest, {
    onSuccess: async ({ request }) => {
      setJob("");
      setOutcome(
        `Replaying ${request?.requestId ?? "the request"}: its failed targets get a new attempt.`,
      );
      await invalidate();
    },
  });
  const replayAll = useMutation(FailureQueueService.method.replayFailures, {
    onSuccess: async ({ recovery }) => {
      const matched = recovery?.matched ?? 0;
      setOutcome(`Replaying ${matched} request${matched === 1 ? "" : "s"}.`);
      setJob(recovery?.recoveryId ?? "");
      await invalidate();
    },
  });
  const failed = replay.error ?? replayAll.error;
  return (
    <>
      <p>
        Requests with a target that failed for good (a 4xx answer, or retries that ran out). A
        replay sends the original body again to the failed targets only.
      </p>
      <RequestFilters
        statuses={[RequestStatus.FAILED, RequestStatus.PARTIALLY_FAILED]}
        problem={failures.error ? problemOf(failures.error) : null}
        onApply={setFilter}
      />
      <p role="status" className="saved">
        {outcome}{" "}
        {job && (
          <Link to={projectPath(project, "recoveries")}>
            Its recovery job, <code>{job}</code>, shows its progress.
          </Link>
        )}
      </p>
      <FormError problem={failed ? problemOf(failed) : null} />
      <Loaded query={failures} token={token}>
        {({ requests }) => (
          <>
            {requests.length > 0 && (
              <ConfirmButton
                label="Replay all"
                question={`Replay every failure matching the filter (${requests.length}${requests.length === 50 ? "+" : ""})?`}
                confirmLabel="Yes, replay all"
                onConfirm={() => replayAll.mutate({ project, filter: filterInit(filter) })}
              />
            )}
            <RequestTable
              project={project}
              requests={requests}
              caption="Failed requests"
              actions={(r) => (
                <button
                  type="button"
                  disabled={replay.isPending}
                  onClick={() => replay.mutate({ project, requestId: r.requestId })}
                  aria-label={`Replay ${r.requestId}`}
                >
                  Replay
                </button>
              )}
            />
          </>
        )}
      </Loaded>
    </>
  );
}
