/** Who started a workflow of the test stack's Temporal, as its history says. */
import { SYNC_BATCH_WORKFLOW, searchAttributes } from "../core/temporal.ts";
import { eventually, relayTemporal } from "./helpers.ts";

/**
 * Who started a workflow, by its history's first event (`{pid}@relay-worker` for a sync call a
 * worker took from its edge, workflows/sync-calls.ts), and whether Temporal handed its first
 * task back in the start's answer (eager start).
 */
export async function starterOf(workflowId: string): Promise<{ identity: string; eager: boolean }> {
  const temporal = await relayTemporal();
  try {
    const history = await temporal.workflow.getHandle(workflowId).fetchHistory();
    const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
    return { identity: started?.identity ?? "", eager: started?.eagerExecutionAccepted === true };
  } finally {
    await temporal.connection.close();
  }
}

/**
 * The workflows of `type` that carry a request in their `RelayRequestIds` (a worker's sync batch,
 * an edge's async batch), as visibility lists them now.
 */
export async function batchesOf(requestId: string, type = SYNC_BATCH_WORKFLOW): Promise<string[]> {
  const temporal = await relayTemporal();
  try {
    const ids: string[] = [];
    const query = `WorkflowType = "${type}" AND ${searchAttributes.requestIds} = "${requestId}"`;
    for await (const batch of temporal.workflow.list({ query })) ids.push(batch.workflowId);
    return ids;
  } finally {
    await temporal.connection.close();
  }
}

/** The sync batch a worker made a request's sync call in, once visibility lists it. */
export async function syncBatchOf(requestId: string): Promise<string> {
  return eventually(async () => (await batchesOf(requestId))[0]);
}
