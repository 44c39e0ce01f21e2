import { fromBase64 } from "../../core/base64.ts";
import {
  type Accepted,
  acceptedStatus,
  bodyTravelsInline,
  type SyncOutcome,
} from "../../core/delivery.ts";
import { notQueued, RelayError } from "../../core/errors.ts";
import { idempotent } from "../../core/idempotency.ts";
import {
  type LaneRef,
  laneIdOf,
  ORDERING_KEY_HEADER,
  orderingKeyProblem,
} from "../../core/lanes.ts";
import { heldPlaces } from "../../core/waiting.ts";
import { travelsInBatch } from "../batcher.ts";
import type { EdgeDeps } from "../deps.ts";
import { endpointName, json, type Received, skippedAnswer } from "../pipeline.ts";
import { answerHeaders, proxyStream } from "../stream.ts";
import { batchedCall, claimAlone, deliveryInput, queueInBatch } from "./batched.ts";
import { refusalError, reservationOf, reserveCall, reservedFor, spareHold } from "./credits.ts";
import { inLane, joinLane } from "./lanes.ts";

/**
 * The last step. Async targets are queued (a batch, or a workflow of their own; 202). A sync
 * target's answer comes back through a worker (workflows/sync-calls.ts); a stream target is
 * proxied directly. Either way the async targets are queued beside it in the same call (mixed
 * mode, mirrors; a mirror's in a batch first). What the call reserved first (credits, a delayed
 * call's place) goes back for the targets it could not hand on.
 */
export function deliver(deps: EdgeDeps): (envelope: Received) => Promise<Response> {
  return async function deliver(call) {
    const ordering = await orderingOf(deps, call);
    // A stream call may find its credit held already, and its request id with it.
    const spare = await spareHold(deps, call);
    const heldAhead = spare?.requestId ?? null;
    const requestId = heldAhead
      ? { id: heldAhead, bodyTag: undefined }
      : await requestIdOf(deps, call);
    const { bodyTag } = requestId;
    // Its key is claimed in Postgres, where calls that share batches are told apart.
    const claim = queuesOnly(call) && bodyTag ? { requestId: requestId.id, bodyTag } : undefined;
    // An ordered call joins its lane as its batch is accepted. A delayed call shares a batch due
    // in the same second, unless ordered (it joins its lane at its time) or keyed (a repeat
    // answers what its first call was told, and a batch's claim remembers no delay).
    // A call to a target that holds its deliveries now takes a place under its project's cap
    // for it (core/waiting.ts), alone: one reservation under the project's waiting lock.
    const places =
      call.notBefore || ordering
        ? []
        : heldPlaces(call.endpoint.targets, call.projectState.heldTargetIds);
    // A mirror's async targets share a batch too; its sync target is then called as one alone.
    const mirror =
      !call.notBefore && places.length === 0 && mirrorsInBatch(call, ordering, bodyTag);
    const batchable = call.notBefore
      ? queuesUnordered(call, ordering) && !bodyTag
      : (queuesOnly(call) && places.length === 0) || mirror;
    const queuedTargets = call.endpoint.targets.filter((t) => t.deliveryMode === "async");
    const batched =
      deps.batch && batchable
        ? {
            ...batchedCall(deps, call, requestId.id, claim, ordering, queuedTargets),
            ...(mirror && { mirrored: true as const }),
          }
        : null;
    let inBatch: { status: Accepted; syncSlot: SyncSlot | null } | undefined;
    if (deps.batch && batched) {
      // Its sync slot first: a mirror refused one has queued nothing.
      const syncSlot = mirror ? claimSyncSlot(deps, call) : null;
      const accepted = await queueInBatch(deps.batch, call, batched).catch((error: unknown) => {
        syncSlot?.release();
        throw error;
      });
      if (accepted && !mirror) {
        return json(202, { status: accepted, requestId: requestId.id }, call.responseHeaders);
      }
      if (accepted) inBatch = { status: accepted, syncSlot };
      else syncSlot?.release();
    }
    // Going alone, its key first: a repeat, or this call accepted after all (its group's
    // acceptance committed unanswered), is answered as its first call was.
    const repeat = claim && (await claimAlone(deps, call, claim));
    if (repeat) return repeat;
    let laneJoined: boolean | undefined;
    /** A place taken here for a call that then did not start is given back. */
    let leaveUnstarted = async () => {};
    // An ordered call left to go alone, its group's acceptance unanswered in time: had that
    // committed after all, its place is in its lane already and the sweep starts its batch, so
    // it must not start on its own too (its lane would wait on it for good). A keyed call's
    // claim said none did (a repeat is answered above): a place there is an earlier try's of the
    // same request, and it starts (Temporal's workflow id tells a start made before).
    if (batched?.lane) {
      const place = batched.lane;
      laneJoined = await joinLane(deps, place);
      if (!laneJoined && !claim) {
        const accepted = { status: acceptedStatus(batched.input), requestId: requestId.id };
        return json(202, accepted, call.responseHeaders);
      }
      leaveUnstarted = () => deps.leaveLane(place).catch(() => {});
    }
    // A call answered by its one sync target reserves in the worker, just before the target's
    // call (SyncInput.holds): the caller's wait has no control-plane round trip.
    const workerReserves = syncAlone(call);
    const reserved = workerReserves
      ? null
      : heldAhead || inBatch
        ? reservedFor(deps, call.project, heldAhead ?? requestId.id)
        : await reserveCall(deps, call, requestId.id, places).catch(async (error: unknown) => {
            await leaveUnstarted();
            throw error;
          });
    // Handed on: to Temporal, or to the stream (its record settles it); the rest go back.
    const pending = new Set(call.endpoint.targets.map((t) => t.id));
    const handedOn = (targets: readonly { id: string }[]) => {
      for (const target of targets) pending.delete(target.id);
    };
    if (inBatch) handedOn(queuedTargets);
    try {
      return await relayCall(deps, call, requestId, ordering, handedOn, {
        workerReserves,
        laneJoined,
        inBatch,
        ...(spare && { answerBegun: spare.holdNext }),
      });
    } catch (error) {
      reserved?.release([...pending]);
      spare?.holdNext();
      if (call.endpoint.targets.every((t) => pending.has(t.id))) await leaveUnstarted();
      throw error;
    }
  };
}

/**
 * A mirror whose async targets may share a batch: one sync target beside them, unordered, with
 * no Idempotency-Key (a batch claims keys of async calls only), its body inline in a batch.
 */
function mirrorsInBatch(call: Received, ordering: LaneRef | undefined, bodyTag?: string): boolean {
  const { targets } = call.endpoint;
  const sync = targets.filter((t) => t.deliveryMode === "sync").length;
  const async = targets.filter((t) => t.deliveryMode === "async").length;
  return (
    sync === 1 &&
    async === targets.length - 1 &&
    async > 0 &&
    !ordering &&
    !bodyTag &&
    travelsInBatch(call.body.byteLength)
  );
}

/** The call's one target is sync, and it is not delayed. */
function syncAlone(call: Received): boolean {
  const [only, ...others] = call.endpoint.targets;
  return only?.deliveryMode === "sync" && others.length === 0 && !call.notBefore;
}

/** Whether the call's endpoint queues only (async targets), unordered. */
function queuesUnordered(call: Received, ordering: LaneRef | undefined): boolean {
  return queuesOnly(call) && ordering === undefined;
}

/** Whether the call's endpoint only queues (async targets). */
function queuesOnly(call: Received): boolean {
  const { targets } = call.endpoint;
  return targets.length > 0 && targets.every((t) => t.deliveryMode === "async");
}

/**
 * An ordered endpoint's call's lane (core/lanes.ts): its Relay-Ordering-Key's, or the endpoint's
 * default lane when it sends none. A key out of bounds is refused before anything is queued, on
 * any endpoint (the header's contract is one); an unordered endpoint otherwise ignores it.
 */
async function orderingOf(deps: EdgeDeps, call: Received): Promise<LaneRef | undefined> {
  const key = call.request.headers.get(ORDERING_KEY_HEADER) ?? "";
  const problem = orderingKeyProblem(key);
  if (problem) throw new RelayError("bad_request", problem);
  if (call.endpoint.ordering !== "fifo") return undefined;
  return { laneId: await laneIdOf(call.project, call.endpoint, key, deps.idDigest), key };
}

/** The call's request id, and the body's tag when it repeats an Idempotency-Key. */
export async function requestIdOf(
  deps: EdgeDeps,
  call: Received,
): Promise<{ id: string; bodyTag: string | undefined }> {
  if (call.idempotencyKey === null) return { id: deps.newRequestId(), bodyTag: undefined };
  const { requestId, bodyTag } = await idempotent(
    {
      project: call.project,
      line: call.endpoint.line,
      endpoint: call.endpoint.path,
      apiKeyId: call.key.id,
      key: call.idempotencyKey,
    },
    call.body,
    deps.idDigest,
  );
  return { id: requestId, bodyTag };
}

/** How a call's reservation was made, and what waits for its answer to begin. */
interface Relaying {
  /** Left to the worker (a sync call alone). */
  workerReserves: boolean;
  /** Its lane joined already, anew or not (see `deliver`). */
  laneJoined?: boolean | undefined;
  /** Told once a stream's answer began (../stream.ts `StreamCall.answerBegun`). */
  answerBegun?: () => void;
  /** A mirror's async targets, accepted in a batch, and the sync slot taken for it then. */
  inBatch?: { status: Accepted; syncSlot: SyncSlot | null } | undefined;
}

/**
 * The call, its id chosen and its reservation made (or left to the worker); `handedOn` told of
 * each target queued.
 */
async function relayCall(
  deps: EdgeDeps,
  call: Received,
  { id: requestId, bodyTag }: { id: string; bodyTag: string | undefined },
  ordering: LaneRef | undefined,
  handedOn: (targets: readonly { id: string }[]) => void,
  { workerReserves, answerBegun, laneJoined, inBatch }: Relaying,
): Promise<Response> {
  const { endpoint } = call;
  // A failed delivery's answer names the request too, so its log entry can be found.
  call.responseHeaders.set("x-relay-request-id", requestId);
  const async = endpoint.targets.filter((t) => t.deliveryMode === "async");
  const answering = endpoint.targets.find((t) => t.deliveryMode !== "async");
  // Workflows carry a large body by reference; a stream target gets it straight from the edge.
  const throughTemporal = async.length > 0 || answering?.deliveryMode === "sync";
  const bodyRef =
    throughTemporal && !bodyTravelsInline(call.body.byteLength, async.length)
      ? // A repeat with another body must not overwrite the first one's: its copy is tagged.
        await deps
          .storeBody(call.project, bodyTag ? `${requestId}.${bodyTag}` : requestId, call.body)
          .catch(() => {
            throw notQueued();
          })
      : undefined;
  const { targets: _, ...request } = deliveryInput(deps, call, requestId, bodyRef, ordering);
  const syncSlot = inBatch
    ? inBatch.syncSlot
    : answering?.deliveryMode === "sync"
      ? claimSyncSlot(deps, call)
      : null;
  const queuing = inBatch
    ? Promise.resolve(inBatch.status)
    : async.length > 0
      ? inLane(
          deps,
          { ...request, targets: async },
          () => deps.temporal.startDelivery({ ...request, targets: async }, call.trace, bodyTag),
          laneJoined,
        )
      : null;
  const queued =
    queuing?.then((status) => {
      handedOn(async);
      return status;
    }) ?? null;
  if (!answering) {
    return json(202, { status: await queued, requestId }, call.responseHeaders);
  }
  if (answering.deliveryMode === "stream") {
    await queued;
    const { headers: __, bodyBase64: ___, ...record } = request;
    handedOn([answering]);
    const streamCall = {
      request: call.request,
      body: call.body,
      responseHeaders: call.responseHeaders,
      trace: call.trace,
      signingKeys: call.projectState.signingKeys.get(endpointName(endpoint)) ?? [],
      ...(answerBegun && { answerBegun }),
    };
    return proxyStream(deps, streamCall, { ...record, target: answering, ownsStatus: !queued });
  }
  handedOn([answering]); // its workflow settles its hold, or, never started, the sweep
  const [, outcome] = await Promise.all([
    queued,
    deps.temporal
      .runSync(
        {
          ...request,
          target: answering,
          ownsStatus: !queued,
          ...(workerReserves && { holds: reservationOf(call, requestId).holds }),
        },
        call.request.signal,
        call.trace,
        bodyTag,
      )
      .finally(() => syncSlot?.release()),
  ]).catch(async (error: unknown) => {
    await queued?.catch(() => {}); // whether the async targets were handed on after all
    throw error;
  });
  return syncAnswer(outcome, call, requestId);
}

/**
 * One of the project's sync slots on this edge (WorkflowStarter.claimSync). None free is a 503
 * with Retry-After, answered before anything is queued.
 */
/** One of the project's sync slots on this edge, held while its call is in flight. */
type SyncSlot = { release(): void };

function claimSyncSlot(deps: EdgeDeps, call: Received): SyncSlot {
  const slot = deps.temporal.claimSync(call.project);
  if (slot) return slot;
  throw tooManySync(call.responseHeaders);
}

/** The project's sync calls fill its share of this edge, or of the worker that took the call. */
function tooManySync(relayHeaders: Headers): RelayError {
  relayHeaders.set("retry-after", "1");
  return new RelayError("unavailable", "this project has too many sync calls in flight; retry");
}

/** The sync target's own status, body and safe headers; or why there is none. */
function syncAnswer(outcome: SyncOutcome, call: Received, requestId: string): Response {
  const relayHeaders = call.responseHeaders;
  switch (outcome.kind) {
    case "answered": {
      const headers = answerHeaders(new Headers(outcome.headers), relayHeaders, requestId);
      const body = fromBase64(outcome.bodyBase64);
      const empty = outcome.status === 204 || outcome.status === 304;
      return new Response(empty ? null : body, { status: outcome.status, headers });
    }
    case "timeout":
      throw new RelayError("target_timeout", "the sync target did not answer in time");
    case "unreachable":
      throw new RelayError("target_unreachable", "the sync target could not be reached");
    case "too_large":
      throw new RelayError("target_unreachable", "the sync target's answer was over 1 MiB");
    case "busy":
      throw tooManySync(relayHeaders);
    case "refused":
      throw refusalError(call.key.mode, { code: "insufficient_credits" });
    case "skipped":
      return skippedAnswer(requestId, relayHeaders);
    case "transform_failed":
      throw new RelayError("transform_failed", `the sync target's ${outcome.error}`);
  }
}
