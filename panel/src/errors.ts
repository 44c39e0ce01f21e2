/**
 * Every failed call, from any page, turned into what the panel says about it. The control plane
 * attaches relay.v1.ErrorInfo to its errors (control/errors.ts): the same code and per-field
 * details as the REST body, so each message can stand next to the field it is about.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/relay/v1/errors_pb.ts";

export type ProblemKind =
  /** The token is unknown or was removed: sign in again. */
  | "signed-out"
  /** The control plane did not answer. */
  | "offline"
  | "forbidden"
  | "not-found"
  /** Input the API refused, with `fields` naming where. */
  | "invalid"
  | "failed";

export interface Problem {
  kind: ProblemKind;
  /** The API's error code (`bad_request`, `policy_violation`, ...), or "network". */
  code: string;
  message: string;
  /** Field path ("targets.0.targetUrl") to the API's message about it. */
  fields: Record<string, string>;
}

const kinds: Partial<Record<Code, ProblemKind>> = {
  [Code.Unauthenticated]: "signed-out",
  [Code.Unavailable]: "offline",
  [Code.PermissionDenied]: "forbidden",
  [Code.NotFound]: "not-found",
  [Code.InvalidArgument]: "invalid",
};

export function problemOf(cause: unknown): Problem {
  const error = ConnectError.from(cause);
  // fetch itself failed (connection refused, network down): Connect reports it as Unknown.
  if (error.code === Code.Unknown && error.cause instanceof TypeError) {
    return {
      kind: "offline",
      code: "network",
      message:
        "No answer from the control plane. Check that Relay is running and reachable from this browser.",
      fields: {},
    };
  }
  const [info] = error.findDetails(ErrorInfoSchema);
  return {
    kind: kinds[error.code] ?? "failed",
    code: info?.code ?? Code[error.code],
    message: error.rawMessage,
    fields: Object.fromEntries((info?.details ?? []).map((d) => [d.path, d.message])),
  };
}

/**
 * The API's messages about `path` and anything inside it ("targets" gathers "targets.1.name"),
 * or undefined. Messages about an inner field name it, so nothing is lost by gathering.
 */
export function fieldError(problem: Problem | null, path: string): string | undefined {
  if (!problem) return undefined;
  const messages = Object.entries(problem.fields)
    .filter(([p]) => p === path || p.startsWith(`${path}.`))
    .map(([p, message]) => (p === path ? message : `${p.slice(path.length + 1)}: ${message}`));
  return messages.length > 0 ? messages.join("; ") : undefined;
}

/** Whether a failed query is worth retrying by itself: not when the answer will not change. */
export function retryable(failureCount: number, cause: unknown): boolean {
  const { kind } = problemOf(cause);
  return failureCount < 2 && (kind === "offline" || kind === "failed");
}
