/** Who started a workflow of the test stack's Temporal, as its history says. */
import { relayTemporal } from "./helpers.ts";

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
