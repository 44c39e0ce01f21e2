import { describe, expect, test } from "vitest";
import type { CallReservation, ReservationRefusal } from "../../core/billing.ts";
import {
  acceptedStatus,
  type DeliveryInput,
  type SyncInput,
  type SyncOutcome,
} from "../../core/delivery.ts";
import { RelayError } from "../../core/errors.ts";
import { unkeyedDigest } from "../../core/id-digest.ts";
import type { KeyClaim, KeyClaimOutcome } from "../../core/idempotency.ts";
import type { DeliveryTarget } from "../../core/model.ts";
import type { EdgeDeps } from "../deps.ts";
import type { WorkflowStarter } from "../temporal.ts";
import { deliver } from "./deliver.ts";
import { arrived, hookEndpoint, projectState, received, refusal } from "./testing.ts";

const target = (id: string, deliveryMode: DeliveryTarget["deliveryMode"]): DeliveryTarget => ({
  id,
  name: id,
  targetUrl: `http://${id}`,
  deliveryMode,
  timeoutSeconds: 30,
  headers: {},
});

/** Edge deps around a starter that records what it was asked to run, and what was reserved. */
function edgeWith(
  sync: SyncOutcome = { kind: "timeout" },
  syncSlots = 1,
  reservations: {
    refusal?: ReservationRefusal;
    startFails?: boolean;
    /** What claiming an Idempotency-Key finds, or "fails": the control plane does not answer. */
    claim?: KeyClaimOutcome | "fails";
  } = {},
) {
  const claims: KeyClaim[] = [];
  const started: { input: DeliveryInput; bodyTag: string | undefined }[] = [];
  const synced: SyncInput[] = [];
  const stored: string[] = [];
  const reserved: CallReservation[] = [];
  const released: { requestId: string; targetIds: string[] }[] = [];
  let slots = syncSlots;
  const temporal: WorkflowStarter = {
    ready: async () => {},
    startDelivery: async (input, _trace, bodyTag) => {
      if (reservations.startFails) throw new RelayError("unavailable", "Temporal is down");
      started.push({ input, bodyTag });
      return acceptedStatus(input);
    },
    claimSync: () => (slots-- > 0 ? { release: () => slots++ } : null),
    runSync: async (input) => {
      synced.push(input);
      return sync;
    },
  };
  const deps = {
    state: { now: () => new Date(0) },
    edgeDomain: "relay.test",
    temporal,
    storeBody: async (_project: string, requestId: string) => {
      stored.push(requestId);
      return `body_${requestId}`;
    },
    claimIdempotencyKey: async (_project: string, claim: KeyClaim) => {
      if (reservations.claim === "fails") throw new Error("the control plane is down");
      claims.push(claim);
      return reservations.claim ?? "claimed";
    },
    reserveDeliveries: async (reservation: CallReservation) => {
      reserved.push(reservation);
      return reservations.refusal ?? null;
    },
    releaseDeliveries: async (_project: string, requestId: string, targetIds: string[]) => {
      released.push({ requestId, targetIds });
    },
    newRequestId: () => "req_new",
    idDigest: unkeyedDigest,
    logError: () => {},
  } as unknown as EdgeDeps;
  return { deps, started, synced, stored, reserved, released, claims, slots: () => slots };
}

const callTo = (targets: DeliveryTarget[], init: RequestInit = {}, body = new Uint8Array()) =>
  Object.assign(received(arrived(init), hookEndpoint({ targets })), { body });

test("async targets are queued in one workflow and the caller gets 202 with the request id", async () => {
  const { deps, started } = edgeWith();
  const call = callTo([target("a", "async"), target("b", "async")], {
    headers: { authorization: "Bearer rk_live_x", "x-custom": "kept" },
  });
  const answer = await deliver(deps)(call);
  expect(answer.status).toBe(202);
  expect(await answer.json()).toEqual({ status: "queued", requestId: "req_new" });
  expect(answer.headers.get("x-relay-request-id")).toBe("req_new");
  expect(started).toHaveLength(1);
  const [{ input }] = started as [(typeof started)[0]];
  expect(input.targets.map((t) => t.id)).toEqual(["a", "b"]);
  expect(input.headers).toEqual({ "x-custom": "kept", "cdn-loop": "relay.test" });
});

test("a delayed call is 202 scheduled, its workflow told when", async () => {
  const { deps, started } = edgeWith();
  const call = Object.assign(callTo([target("a", "async")]), {
    notBefore: new Date("2026-11-24T13:00:00Z"),
  });
  const answer = await deliver(deps)(call);
  expect(answer.status).toBe(202);
  expect(await answer.json()).toEqual({ status: "scheduled", requestId: "req_new" });
  expect(started.map((s) => s.input.notBefore)).toEqual(["2026-11-24T13:00:00.000Z"]);
});

test("a sync target answers the caller while the async ones are queued beside it", async () => {
  const { deps, started, synced } = edgeWith({
    kind: "answered",
    status: 201,
    headers: { "content-type": "text/plain", "set-cookie": "dropped" },
    bodyBase64: btoa("made"),
  });
  const answer = await deliver(deps)(callTo([target("a", "async"), target("s", "sync")]));
  expect([answer.status, await answer.text()]).toEqual([201, "made"]);
  expect(answer.headers.get("content-type")).toBe("text/plain");
  expect(answer.headers.get("x-relay-request-id")).toBe("req_new");
  expect(started.map(({ input }) => input.targets.map((t) => t.id))).toEqual([["a"]]);
  // The async workflow owns the request's status; the sync one only its own attempt.
  expect(synced.map((input) => [input.target.id, input.ownsStatus])).toEqual([["s", false]]);
});

test.each([
  [{ kind: "timeout" } as const, "target_timeout"],
  [{ kind: "unreachable", error: "ECONNREFUSED" } as const, "target_unreachable"],
  [{ kind: "too_large" } as const, "target_unreachable"],
])("a sync call that got no usable answer (%o) is refused with %s", async (outcome, code) => {
  const { deps, slots } = edgeWith(outcome);
  const refused = await refusal(deliver(deps)(callTo([target("s", "sync")])));
  expect(refused.code).toBe(code);
  expect(slots()).toBe(1); // its sync slot was given back
});

test("with every sync slot taken the call is a 503 with Retry-After and nothing is queued", async () => {
  const { deps, started, synced } = edgeWith(undefined, 0);
  const call = callTo([target("a", "async"), target("s", "sync")]);
  const refused = await refusal(deliver(deps)(call));
  expect(refused.code).toBe("unavailable");
  expect(call.responseHeaders.get("retry-after")).toBe("1");
  expect([started, synced]).toEqual([[], []]);
});

test("a body too large for Temporal's payloads travels by reference", async () => {
  const { deps, started, stored } = edgeWith();
  const body = new Uint8Array(512 * 1024);
  await deliver(deps)(callTo([target("a", "async")], {}, body));
  expect(stored).toEqual(["req_new"]);
  const [{ input }] = started as [(typeof started)[0]];
  expect([input.bodyRef, input.bodyBase64, input.bodyBytes]).toEqual([
    "body_req_new",
    "",
    body.byteLength,
  ]);
});

test("an Idempotency-Key names the request: the same key gives the same id, tagged by body", async () => {
  const { deps, started } = edgeWith();
  const keyed = (body: string) =>
    Object.assign(callTo([target("a", "async")], {}, new TextEncoder().encode(body)), {
      idempotencyKey: "order-1",
    });
  const ids = [];
  for (const body of ["{}", "{}", '{"other":1}']) {
    ids.push(
      ((await (await deliver(deps)(keyed(body))).json()) as { requestId: string }).requestId,
    );
  }
  expect(new Set(ids).size).toBe(1);
  expect(ids[0]).not.toBe("req_new");
  const [first, repeat, other] = started.map((s) => s.bodyTag);
  expect(first).toBe(repeat);
  expect(other).not.toBe(first);
});

describe("an Idempotency-Key's call to an async-only endpoint that goes as a workflow of its own", () => {
  const keyed = () =>
    Object.assign(callTo([target("a", "async")]), {
      idempotencyKey: "order-1",
      notBefore: new Date("2026-11-24T13:00:00Z"),
    });

  test("claims its key, then is queued as its own workflow", async () => {
    const { deps, started, claims } = edgeWith(undefined, 1, { claim: "own_workflow" });
    const answer = await deliver(deps)(keyed());
    expect(answer.status).toBe(202);
    const { requestId } = (await answer.json()) as { requestId: string };
    expect(claims.map((c) => c.requestId)).toEqual([requestId]);
    expect(started.map((s) => [s.input.requestId, s.bodyTag])).toEqual([
      [requestId, claims[0]?.bodyTag],
    ]);
  });

  test("is answered as its first call was when that one shared a batch, and queues nothing", async () => {
    const { deps, started } = edgeWith(undefined, 1, { claim: "repeat" });
    const answer = await deliver(deps)(keyed());
    expect(answer.status).toBe(202);
    expect(await answer.json()).toMatchObject({ status: "queued" });
    expect(started).toEqual([]);
  });

  test("with another body than its batched first call's is 422, and queues nothing", async () => {
    const { deps, started } = edgeWith(undefined, 1, { claim: "reused" });
    await expect(deliver(deps)(keyed())).rejects.toMatchObject({ code: "idempotency_key_reused" });
    expect(started).toEqual([]);
  });

  test("is 503 when its key cannot be claimed: a repeat of a batched call would go twice", async () => {
    const { deps, started } = edgeWith(undefined, 1, { claim: "fails" });
    await expect(deliver(deps)(keyed())).rejects.toMatchObject({ code: "unavailable" });
    expect(started).toEqual([]);
  });
});

describe("reservations", () => {
  const body = new Uint8Array(70_000); // two credits' worth

  test("a metered call holds each delivery's credits under its request id before it is queued", async () => {
    const { deps, reserved, started, released } = edgeWith({
      kind: "answered",
      status: 200,
      headers: {},
      bodyBase64: "",
    });
    const call = callTo([target("a", "async"), target("s", "sync")], {}, body);
    expect((await deliver(deps)(call)).status).toBe(200);
    expect(reserved).toEqual([
      {
        project: "acme",
        pool: "live",
        requestId: "req_new",
        holds: [
          { targetId: "a", credits: 2 },
          { targetId: "s", credits: 2 },
        ],
        notBefore: null,
      },
    ]);
    expect(started).toHaveLength(1);
    expect(released).toEqual([]);
  });

  test("a call that does not fit is 402 and queues nothing; past the cap, 409", async () => {
    for (const [answer, code] of [
      [{ code: "insufficient_credits" }, "insufficient_credits"],
      [{ code: "limit_exceeded", cap: 7 }, "limit_exceeded"],
    ] as const) {
      const { deps, started, stored } = edgeWith(undefined, 1, { refusal: answer });
      const refused = await refusal(deliver(deps)(callTo([target("a", "async")], {}, body)));
      expect(refused.code).toBe(code);
      expect(started).toEqual([]);
      expect(stored).toEqual([]);
    }
    const { deps } = edgeWith(undefined, 1, { refusal: { code: "limit_exceeded", cap: 7 } });
    const refused = await refusal(deliver(deps)(callTo([target("a", "async")])));
    expect(refused.message).toMatch(/cap of 7 scheduled and held deliveries/);
  });

  test("a start that fails gives back what was reserved for the targets not queued", async () => {
    const { deps, released } = edgeWith(undefined, 1, { startFails: true });
    const refused = await refusal(
      deliver(deps)(callTo([target("a", "async"), target("b", "async")], {}, body)),
    );
    expect(refused.code).toBe("unavailable");
    expect(released).toEqual([{ requestId: "req_new", targetIds: ["a", "b"] }]);
  });

  test("an unmetered call reserves nothing unless it is delayed: then its place, with no credits", async () => {
    const free = (notBefore: Date | null) =>
      Object.assign(
        received(arrived(), hookEndpoint(), projectState(hookEndpoint(), { plan: "free" })),
        { notBefore },
      );
    const { deps, reserved } = edgeWith();
    await deliver(deps)(free(null));
    expect(reserved).toEqual([]);
    const at = new Date("2026-11-24T13:00:00Z");
    await deliver(deps)(free(at));
    expect(reserved).toEqual([
      { project: "acme", pool: "live", requestId: "req_new", holds: [], notBefore: at },
    ]);
  });
});

describe("an ordered call its batch left to go alone", () => {
  /** Its group's acceptance went unanswered in time; `joinedBefore`: whether it committed after all. */
  function orderedAlone(joinedBefore: boolean, reservations: Parameters<typeof edgeWith>[2] = {}) {
    const edge = edgeWith(undefined, 1, reservations);
    const joins: string[] = [];
    const leaves: string[] = [];
    const deps = {
      ...edge.deps,
      batch: async () => ({ alone: true }) as const,
      joinLane: async ({ requestId }: { requestId: string }) => {
        joins.push(requestId);
        return !joinedBefore && joins.length === 1;
      },
      leaveLane: async ({ requestId }: { requestId: string }) => {
        leaves.push(requestId);
      },
    } as unknown as EdgeDeps;
    const call = Object.assign(
      received(arrived(), hookEndpoint({ targets: [target("a", "async")], ordering: "fifo" })),
      { body: new Uint8Array() },
    );
    return { ...edge, deps, call, joins, leaves };
  }

  test("is not started again when its lane holds its place already: its acceptance committed, and its batch is swept", async () => {
    const { deps, call, started, reserved, joins } = orderedAlone(true);
    const answer = await deliver(deps)(call);
    expect(answer.status).toBe(202);
    expect(await answer.json()).toEqual({ status: "queued", requestId: "req_new" });
    expect({ joins, started, reserved }).toEqual({ joins: ["req_new"], started: [], reserved: [] });
  });

  test("gives its place back when it is refused (its credits, or its start): its lane does not wait on it", async () => {
    const credits = { code: "insufficient_credits" } as const;
    for (const refused of [{ refusal: credits }, { startFails: true }]) {
      const { deps, call, started, leaves } = orderedAlone(false, refused);
      await expect(deliver(deps)(call)).rejects.toBeInstanceOf(RelayError);
      expect({ started, left: leaves.slice(0, 1) }).toEqual({ started: [], left: ["req_new"] });
    }
  });

  test("with an Idempotency-Key its claim said no batch took, starts though its place is there: an earlier try's", async () => {
    for (const claim of ["claimed", "own_workflow"] as const) {
      const { deps, call, started, claims } = orderedAlone(true, { claim });
      const keyed = Object.assign(call, { idempotencyKey: "order-7" });
      expect((await deliver(deps)(keyed)).status).toBe(202);
      expect(started.map((s) => s.input.requestId)).toEqual([claims[0]?.requestId]);
    }
  });

  test("joins its lane once and starts as its own workflow when it had no place", async () => {
    const { deps, call, started, joins } = orderedAlone(false);
    expect((await deliver(deps)(call)).status).toBe(202);
    expect(joins).toEqual(["req_new"]);
    expect(started.map((s) => s.input.requestId)).toEqual(["req_new"]);
  });
});
