/**
 * An ordered call takes its place in its lane (core/lanes.ts) before its 202, so the lane's order
 * is the accept order: signal-with-start of the lane's workflow through Temporal's HTTP API
 * (`POST .../workflows/{laneId}/signal-with-start/join`), on the request's task queue and fairness
 * key. When it fails, the request's own workflow is cancelled (best effort) and the caller gets
 * 503, as for a failed start.
 */
import type { DeliveryInput } from "../core/delivery.ts";
import type { RelayError } from "../core/errors.ts";
import {
  LANE_JOIN_SIGNAL,
  LANE_WORKFLOW,
  type LaneInput,
  type LaneJoin,
  type LaneRef,
} from "../core/lanes.ts";
import { jsonPayload, type PayloadCipher, payloadToJson } from "../core/payload-codec.ts";
import { fairnessOf, TASK_QUEUE } from "../core/temporal.ts";

export interface LaneJoinDeps {
  fetch: typeof fetch;
  /** The namespace's workflows URL of Temporal's HTTP API. */
  workflows: string;
  headers: Record<string, string>;
  cipher: PayloadCipher;
  /** Logs Temporal's refusal and answers the caller's 503. */
  unavailable: (call: string, answer: Response | Error) => Promise<RelayError>;
}

export function laneJoiner(deps: LaneJoinDeps) {
  const { workflows, headers } = deps;
  return async function joinLane(input: DeliveryInput, lane: LaneRef): Promise<void> {
    const join: LaneJoin = {
      requestId: input.requestId,
      targetIds: input.targets.map((t) => t.id),
    };
    const laneInput: LaneInput = { project: input.project };
    const [sealedInput, sealedJoin] = await Promise.all([
      deps.cipher.encode([jsonPayload(laneInput)]),
      deps.cipher.encode([jsonPayload(join)]),
    ]);
    const url = `${workflows}/${encodeURIComponent(lane.laneId)}/signal-with-start/${LANE_JOIN_SIGNAL}?noPayloadShorthand`;
    const body = JSON.stringify({
      workflowType: { name: LANE_WORKFLOW },
      taskQueue: { name: TASK_QUEUE },
      priority: fairnessOf(input.project),
      // Temporal deduplicates by it, so a retried join is one join.
      requestId: `join-${input.requestId}`,
      input: { payloads: sealedInput.map(payloadToJson) },
      signalInput: { payloads: sealedJoin.map(payloadToJson) },
    });
    // One more try on a fresh connection, as a start's (./temporal.ts).
    const send = () => deps.fetch(url, { method: "POST", headers, body });
    const response = await send()
      .catch(send)
      .catch((error: unknown) => error as Error);
    if (!(response instanceof Error) && response.ok) {
      await response.body?.cancel();
      return;
    }
    const failed = await deps.unavailable("join an ordering lane", response);
    await deps
      .fetch(`${workflows}/${encodeURIComponent(input.requestId)}/cancel`, {
        method: "POST",
        headers,
        body: JSON.stringify({ reason: "its ordering lane could not be joined" }),
      })
      .then((answer) => answer.body?.cancel())
      .catch(() => {}); // best effort: the 503 tells the caller to send it again
    throw failed;
  };
}
