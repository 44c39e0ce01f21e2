/** The generated enums as the words the API's REST side and the panel's pages use. */
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { CircuitState } from "../../gen/relay/v1/circuits_pb.ts";
import { KeyMode, KeyStatus } from "../../gen/relay/v1/keys_pb.ts";
import { Role } from "../../gen/relay/v1/projects_pb.ts";
import { RequestStatus } from "../../gen/relay/v1/requests_pb.ts";
import { DeliveryMode } from "../../gen/relay/v1/routing_pb.ts";

export type RoleName = "owner" | "editor";
export const roleName = (role: Role): RoleName => (role === Role.OWNER ? "owner" : "editor");

export const keyStatusNames: Record<KeyStatus, string> = {
  [KeyStatus.UNSPECIFIED]: "unknown",
  [KeyStatus.ACTIVE]: "active",
  [KeyStatus.EXPIRED_GRACE]: "grace",
  [KeyStatus.EXPIRED]: "expired",
  [KeyStatus.REVOKED]: "revoked",
};

export const keyModeNames: Record<KeyMode, string> = {
  [KeyMode.UNSPECIFIED]: "unknown",
  [KeyMode.LIVE]: "live",
  [KeyMode.TEST]: "test",
};

export const requestStatusNames: Record<RequestStatus, string> = {
  [RequestStatus.UNSPECIFIED]: "unknown",
  [RequestStatus.QUEUED]: "queued",
  [RequestStatus.DELIVERING]: "delivering",
  [RequestStatus.DELIVERED]: "delivered",
  [RequestStatus.PARTIALLY_FAILED]: "partially failed",
  [RequestStatus.FAILED]: "failed",
  [RequestStatus.SCHEDULED]: "scheduled",
  [RequestStatus.CANCELLED]: "cancelled",
  [RequestStatus.SKIPPED]: "skipped",
};

/** Statuses after which a request changes only by a replay (a skipped one never changes). */
export const finished = (status: RequestStatus) =>
  status === RequestStatus.DELIVERED ||
  status === RequestStatus.PARTIALLY_FAILED ||
  status === RequestStatus.FAILED ||
  status === RequestStatus.CANCELLED ||
  status === RequestStatus.SKIPPED;

export const deliveryModeNames: Record<DeliveryMode, string> = {
  [DeliveryMode.UNSPECIFIED]: "async",
  [DeliveryMode.ASYNC]: "async",
  [DeliveryMode.SYNC]: "sync",
  [DeliveryMode.STREAM]: "stream",
};

export const circuitStateNames: Record<CircuitState, string> = {
  [CircuitState.UNSPECIFIED]: "unknown",
  [CircuitState.CLOSED]: "closed",
  [CircuitState.OPEN]: "open",
  [CircuitState.DISABLED]: "disabled",
};

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });

export function formatTime(timestamp: Timestamp | undefined, empty = "—"): string {
  return timestamp ? dateTime.format(timestampDate(timestamp)) : empty;
}
