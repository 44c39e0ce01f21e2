/** A request's status as a search attribute, so an operator can filter by it in the Temporal UI. */
import { defineSearchAttributeKey } from "@temporalio/common";
import { upsertSearchAttributes } from "@temporalio/workflow";
import type { RequestStatus } from "../core/model.ts";
import { searchAttributes } from "../core/temporal.ts";

const statusKey = defineSearchAttributeKey(searchAttributes.status, "KEYWORD");

export function setStatus(status: RequestStatus): void {
  upsertSearchAttributes([{ key: statusKey, value: status }]);
}
