import { describe, expect, test } from "vitest";
import type { DeliveryTarget } from "./model.ts";
import { TOO_LARGE } from "./read-capped.ts";
import { decodeSigningSecret, importSigningKey, newSigningSecret, verify } from "./signing.ts";
import {
  DROPPED,
  discardAnswer,
  readAnswer,
  sendToTarget,
  type TargetCallInput,
  targetFailure,
} from "./target-call.ts";
import {
  type CallTarget,
  type TargetAnswer,
  type TargetInit,
  TargetRefused,
} from "./target-request.ts";
import { untraced } from "./tracing.ts";
import type { RunTransform, SandboxCall, TransformOutcome } from "./transform.ts";

const target: DeliveryTarget = {
  id: "tgt_1",
  name: "t",
  targetUrl: "https://example.com/in",
  deliveryMode: "async",
  timeoutSeconds: 5,
  headers: { "x-api-key": "configured" },
};

function input(overrides: Partial<TargetCallInput> = {}): TargetCallInput {
  return {
    requestId: "req_1",
    target,
    attempt: 2,
    callerHeaders: { "content-type": "application/json", "x-api-key": "from-the-caller" },
    body: new TextEncoder().encode('{"a":1}'),
    signingKeys: [],
    signedAt: new Date("2030-01-01T00:00:00Z"),
    signal: new AbortController().signal,
    timeoutBounds: "answer",
    trace: untraced,
    project: "acme",
    transform: () => Promise.reject(new Error("this target has no transformation")),
    ...overrides,
  };
}

/** Chunks as they arrive; then, given a signal, a stall until it aborts. */
async function* chunks(parts: string[], signal?: AbortSignal): AsyncGenerator<Uint8Array> {
  for (const part of parts) yield new TextEncoder().encode(part);
  if (signal) await aborted(signal);
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

/** A transport that records its call and answers `answer` (or what `answer` makes of it). */
function transport(answer: (init: TargetInit) => Promise<TargetAnswer>) {
  const calls: { url: string; init: TargetInit }[] = [];
  const callTarget: CallTarget = (url, init) => {
    calls.push({ url, init });
    return answer(init);
  };
  return { callTarget, calls };
}

const ok = (body: AsyncIterable<Uint8Array> | null = null): Promise<TargetAnswer> =>
  Promise.resolve({ status: 200, headers: new Headers({ "content-type": "text/plain" }), body });

test("a call is signed and built as targetRequest builds it, then answered", async () => {
  const secret = newSigningSecret();
  const key = await importSigningKey(decodeSigningSecret(secret));
  const { callTarget, calls } = transport(() => ok(chunks(["hel", "lo"])));
  const call = input({ signingKeys: [{ key, expiresAt: null }] });
  const sent = await sendToTarget(callTarget, call);
  if (!("answer" in sent)) throw new Error(JSON.stringify(sent));
  expect(sent.answer.status).toBe(200);
  const [made] = calls;
  expect(made?.url).toBe(target.targetUrl);
  const headers = made?.init.headers as Headers;
  expect(headers.get("x-api-key")).toBe("configured");
  expect(headers.get("x-relay-attempt")).toBe("2");
  expect(headers.get("webhook-id")).toBe("req_1.tgt_1");
  expect(headers.get("webhook-timestamp")).toBe(String(call.signedAt.getTime() / 1000));
  expect(made?.init.redirect).toBe("manual");
  const signature = {
    id: headers.get("webhook-id") ?? "",
    timestamp: headers.get("webhook-timestamp") ?? "",
    signature: headers.get("webhook-signature") ?? "",
  };
  expect(await verify(secret, signature, call.body, call.signedAt)).toBe(true);
  const read = await readAnswer(sent, 5);
  expect("body" in read && new TextDecoder().decode(read.body as Uint8Array)).toBe("hello");
});

test("the CDN-Loop the edge marked is Relay's own: a target's configured header does not replace it", async () => {
  const { callTarget, calls } = transport(() => ok());
  await sendToTarget(
    callTarget,
    input({
      target: { ...target, headers: { "CDN-Loop": "hidden" } },
      callerHeaders: { "cdn-loop": "cdn-a, relay.test" },
    }),
  );
  const [made] = calls;
  expect((made?.init.headers as Headers | undefined)?.get("cdn-loop")).toBe("cdn-a, relay.test");
});

test("a refused address is a refused failure, with the transport's reason", async () => {
  const reason = "target localhost refused: 127.0.0.1 is a loopback address";
  const { callTarget } = transport(() => Promise.reject(new TargetRefused(reason)));
  expect(await sendToTarget(callTarget, input())).toEqual({
    failure: { kind: "refused", message: reason },
  });
});

test("any other error is unreachable, described with its cause", async () => {
  const error = new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED") });
  const { callTarget } = transport(() => Promise.reject(error));
  expect(await sendToTarget(callTarget, input())).toEqual({
    failure: { kind: "unreachable", message: "TypeError: fetch failed (connect ECONNREFUSED)" },
  });
  expect(targetFailure("gone", false)).toEqual({ kind: "unreachable", message: "gone" });
});

test("a target that does not start answering in time is a timeout, whatever the bounds", async () => {
  for (const timeoutBounds of ["start", "answer"] as const) {
    const { callTarget } = transport((init) => aborted(init.signal));
    const quick = { ...target, timeoutSeconds: 0.02 };
    const sent = await sendToTarget(callTarget, input({ target: quick, timeoutBounds }));
    expect("failure" in sent && sent.failure.kind).toBe("timeout");
    expect("failure" in sent && sent.failure.message).toMatch(/^TimeoutError/);
  }
});

test("the caller's signal aborts the call: unreachable, not a timeout", async () => {
  const caller = new AbortController();
  const { callTarget } = transport((init) => aborted(init.signal));
  const sending = sendToTarget(callTarget, input({ signal: caller.signal }));
  caller.abort(new Error("caller left"));
  expect(await sending).toEqual({
    failure: { kind: "unreachable", message: "Error: caller left" },
  });
});

test("bounding the whole answer, a body still arriving at the timeout is a timeout", async () => {
  const { callTarget } = transport((init) => ok(chunks(["12"], init.signal)));
  const quick = { ...target, timeoutSeconds: 0.02 };
  const sent = await sendToTarget(callTarget, input({ target: quick }));
  if (!("answer" in sent)) throw new Error(JSON.stringify(sent));
  const read = await readAnswer(sent, 100);
  expect("failure" in read && read.failure.kind).toBe("timeout");
});

test("bounding only the start, the timeout no longer runs once the answer started", async () => {
  const { callTarget } = transport(() => ok(chunks(["12"])));
  const quick = { ...target, timeoutSeconds: 0.02 };
  const sent = await sendToTarget(callTarget, input({ target: quick, timeoutBounds: "start" }));
  if (!("answer" in sent)) throw new Error(JSON.stringify(sent));
  await new Promise((resolve) => setTimeout(resolve, 60));
  expect(sent.signal.aborted).toBe(false);
  expect(sent.timedOut()).toBe(false);
});

test("a body past the limit is too large and dropped; a discarded one ends the call", async () => {
  const { callTarget } = transport(() => ok(chunks(["12345", "6789"])));
  const sent = await sendToTarget(callTarget, input());
  if (!("answer" in sent)) throw new Error(JSON.stringify(sent));
  expect(await readAnswer(sent, 8)).toEqual({ body: TOO_LARGE });
  expect(sent.signal.aborted).toBe(true);

  const again = await sendToTarget(callTarget, input());
  if (!("answer" in again)) throw new Error(JSON.stringify(again));
  discardAnswer(again);
  expect(again.signal.aborted).toBe(true);
  expect(again.timedOut()).toBe(false);
});

test("an answer read to its end is over: neither its timeout nor its caller aborts it after", async () => {
  const caller = new AbortController();
  const { callTarget } = transport(() => ok(chunks(["12"])));
  const quick = { ...target, timeoutSeconds: 0.02 };
  const sent = await sendToTarget(callTarget, input({ target: quick, signal: caller.signal }));
  if (!("answer" in sent)) throw new Error(JSON.stringify(sent));
  expect(await readAnswer(sent, 8)).toEqual({ body: new TextEncoder().encode("12") });
  await new Promise((resolve) => setTimeout(resolve, 60));
  caller.abort(new Error("caller left"));
  expect(sent.signal.aborted).toBe(false);
});

test("a null body reads as empty", async () => {
  const { callTarget } = transport(() => ok(null));
  const sent = await sendToTarget(callTarget, input());
  if (!("answer" in sent)) throw new Error(JSON.stringify(sent));
  expect(await readAnswer(sent, 8)).toEqual({ body: new Uint8Array() });
});

describe("a target's transformation", () => {
  const transforming = { ...target, transform: "(request) => request" };
  const ran: { project: string; call: SandboxCall }[] = [];
  const runs =
    (outcome: (call: SandboxCall) => TransformOutcome): RunTransform =>
    async (project, _source, call) => {
      ran.push({ project, call });
      return outcome(call);
    };

  test("is handed the call as it would go, and what it hands back is sent, and signed", async () => {
    const secret = newSigningSecret();
    const key = await importSigningKey(decodeSigningSecret(secret));
    const { callTarget, calls } = transport(() => ok());
    const call = input({
      target: { ...transforming, targetUrl: "https://example.com/in?v=1" },
      signingKeys: [{ key, expiresAt: null }],
      transform: runs((handed) => ({
        call: {
          path: "/orders",
          query: { v: "2" },
          headers: { "content-type": "application/json", "x-shape": "v2" },
          bodyText: `{"wrapped":${handed.bodyText}}`,
        },
      })),
    });
    const sent = await sendToTarget(callTarget, call);
    expect("answer" in sent).toBe(true);
    expect(ran.at(-1)).toEqual({
      project: "acme",
      call: {
        path: "/in",
        query: { v: "1" },
        headers: { "content-type": "application/json", "x-api-key": "configured" },
        bodyText: '{"a":1}',
      },
    });
    const [made] = calls;
    expect(made?.url).toBe("https://example.com/orders?v=2");
    const headers = made?.init.headers as Headers;
    // What it handed back replaces the configured headers; Relay's own still come last.
    expect(headers.get("x-api-key")).toBeNull();
    expect(headers.get("x-shape")).toBe("v2");
    expect(headers.get("webhook-id")).toBe("req_1.tgt_1");
    const body = made?.init.body as Uint8Array;
    expect(new TextDecoder().decode(body)).toBe('{"wrapped":{"a":1}}');
    const signature = {
      id: headers.get("webhook-id") ?? "",
      timestamp: headers.get("webhook-timestamp") ?? "",
      signature: headers.get("webhook-signature") ?? "",
    };
    expect(await verify(secret, signature, body, call.signedAt)).toBe(true);
  });

  test("that drops the call leaves the target uncalled", async () => {
    const { callTarget, calls } = transport(() => ok());
    const call = input({ target: transforming, transform: runs(() => ({ dropped: true })) });
    expect(await sendToTarget(callTarget, call)).toEqual(DROPPED);
    expect(calls).toEqual([]);
  });

  test("that fails is the call's failure, the target uncalled", async () => {
    const { callTarget, calls } = transport(() => ok());
    const failing = runs(() => ({ error: "it ran past 50 ms" }));
    const sent = await sendToTarget(
      callTarget,
      input({ target: transforming, transform: failing }),
    );
    expect(sent).toEqual({
      failure: { kind: "transform", message: "its transformation failed: it ran past 50 ms" },
    });
    expect(calls).toEqual([]);
  });
});
