/**
 * A retry and a replay go to the target as it is now, by its id (docs/api.md "Targets change"):
 * an edited target's next attempt takes its new URL and headers; a deleted target's delivery ends
 * at its next attempt, never reaching the old URL again, and a replay of it is 409 naming why.
 */
import { afterAll, expect, test } from "vitest";
import {
  api,
  eventually,
  finishedLog,
  projectWithEndpoint,
  type RequestLog,
  relay,
  targetServer,
} from "./helpers.ts";

const old = await targetServer(() => ({ status: 503 }));
const moved = await targetServer();
afterAll(async () => {
  await old.close();
  await moved.close();
});

const ofRequest = (received: typeof old.received, requestId: string) =>
  received.filter((r) => r.headers["x-relay-request-id"] === requestId);

/** A call to a target that answers 503, retried, once its first attempt reached it. */
async function retryingCall() {
  const p = await projectWithEndpoint([
    { name: "t", targetUrl: old.url, headers: { authorization: "Bearer old-secret" } },
  ]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
  await eventually(async () => ofRequest(old.received, requestId).length >= 1);
  return { p, requestId, endpoint: `${p.base}/lines/v1/endpoints/hook` };
}

test("an edited target's retries go to its new URL with its new headers", async () => {
  const { p, requestId, endpoint } = await retryingCall();
  const edited = await api(p.ownerToken, "PUT", endpoint, {
    targets: [{ name: "t", targetUrl: moved.url, headers: { "x-new": "yes" } }],
  });
  expect(edited.status).toBe(200);
  const log = await finishedLog<RequestLog>(p, requestId, 30_000);
  expect(log.status).toBe("delivered");
  const [arrived] = ofRequest(moved.received, requestId);
  expect(arrived?.headers["x-new"]).toBe("yes");
  expect(arrived?.headers.authorization).toBeUndefined();
});

test("a deleted target's delivery ends at its next attempt, and its replay is 409 naming why", async () => {
  const { p, requestId, endpoint } = await retryingCall();
  expect((await api(p.ownerToken, "DELETE", endpoint)).status).toBe(204);
  const deletedAt = Date.now();
  const log = await finishedLog<RequestLog>(p, requestId, 30_000);
  expect(log.status).toBe("failed");
  expect(log.attempts.at(-1)?.error).toMatch(/target was deleted/);
  expect(ofRequest(old.received, requestId).filter((r) => r.at > deletedAt + 500)).toEqual([]);

  const replay = await api(p.ownerToken, "POST", `${p.base}/requests/${requestId}/replay`);
  expect(replay.status).toBe(409);
  expect(replay.body).toMatchObject({ error: { code: "conflict" } });
  expect((replay.body as { error: { message: string } }).error.message).toMatch(/deleted/);
  expect(ofRequest(old.received, requestId).filter((r) => r.at > deletedAt + 500)).toEqual([]);
});

test("a replay goes to the target as it is now", async () => {
  const ok = await targetServer();
  const p = await projectWithEndpoint([
    { name: "t", targetUrl: ok.url, headers: { authorization: "Bearer old-secret" } },
  ]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: "{}" })).json();
  expect((await finishedLog(p, requestId)).status).toBe("delivered");
  await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
    targets: [{ name: "t", targetUrl: moved.url }],
  });
  expect((await api(p.ownerToken, "POST", `${p.base}/requests/${requestId}/replay`)).status).toBe(
    202,
  );
  await eventually(async () => ofRequest(moved.received, requestId).length === 1);
  expect(ofRequest(moved.received, requestId)[0]?.headers.authorization).toBeUndefined();
  expect(ok.received).toHaveLength(1);
  await ok.close();
});

test("deliveries held for a paused target end within a minute of its endpoint's deletion, not at their hourly look", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: moved.url }]);
  const endpoint = `${p.base}/lines/v1/endpoints/hook`;
  await api(p.ownerToken, "POST", `${endpoint}/targets/t/pause`);
  const ids = await Promise.all(
    [1, 2].map(async (n) => {
      const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: `{"n":${n}}` });
      return answer.json().requestId as string;
    }),
  );
  await eventually(async () => {
    const circuits = await api<{ targets: { waiting: number }[] }>(
      p.ownerToken,
      "GET",
      `${endpoint}/circuits`,
    );
    return circuits.body.targets[0]?.waiting === 2;
  });
  expect((await api(p.ownerToken, "DELETE", endpoint)).status).toBe(204);
  for (const id of ids) {
    const log = await finishedLog<RequestLog>(p, id, 60_000);
    expect(log.status).toBe("failed");
    expect(log.attempts.at(-1)?.error).toMatch(/target was deleted/);
  }
  expect(ids.flatMap((id) => ofRequest(moved.received, id))).toEqual([]);
}, 90_000);
