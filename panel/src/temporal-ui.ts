/** Links into the Temporal UI, where the deployment gives its address (`workflowsUrl`). */
import { searchAttributes } from "../../core/temporal.ts";

/**
 * The Temporal UI's list of a request's workflows: its own (workflow id = request id) and, under
 * load, the batch that made its first attempt, which lists it in RelayRequestIds. A batched
 * request has no workflow of its own while that attempt is in flight, nor ever if it settled it.
 */
export function requestWorkflowsUrl(workflowsUrl: string, requestId: string): string {
  const id = JSON.stringify(requestId);
  const query = `WorkflowId=${id} OR ${searchAttributes.requestIds}=${id}`;
  return `${workflowsUrl}?query=${encodeURIComponent(query)}`;
}
