/**
 * A request's status as a search attribute, so an operator can filter by it in the Temporal UI;
 * and the project's, which the workflows a request starts carry too.
 */
import { defineSearchAttributeKey } from "@temporalio/common";
import { upsertSearchAttributes } from "@temporalio/workflow";
import type { RequestStatus } from "../core/model.ts";
import { searchAttributes } from "../core/temporal.ts";

const statusKey = defineSearchAttributeKey(searchAttributes.status, "KEYWORD");
export const projectKey = defineSearchAttributeKey(searchAttributes.project, "KEYWORD");

export function setStatus(status: RequestStatus): void {
  upsertSearchAttributes([{ key: statusKey, value: status }]);
}
