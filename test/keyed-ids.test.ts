/**
 * Ids Relay derives from callers' values travel in plain Temporal metadata (workflow ids, a
 * start's request id, lane ids): they are keyed with the deployment's id key (docs/security.md
 * "Payloads in Temporal"), so a guessed Idempotency-Key, body or ordering key cannot be confirmed
 * by hashing it, without the deployment's secrets.
 */
import { afterAll, expect, test } from "vitest";
import { unkeyedDigest } from "../core/id-digest.ts";
import { idempotent } from "../core/idempotency.ts";
import { laneIdOf } from "../core/lanes.ts";
import { connect } from "../store/db.ts";
import {
  api,
  eventually,
  finishedLog,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

const sql = connect(stack().databaseUrl, { max: 2 });
const sink = await targetServer();
afterAll(async () => {
  await sink.close();
  await sql.end();
});

test("a request id derived from an Idempotency-Key is not the unkeyed hash of the call's values", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }]);
  const body = '{"order":1}';
  const headers = { "idempotency-key": "order-1" };
  const first = await relay(p.slug, "/v1/hook", { key: p.key, body, headers });
  expect(first.status).toBe(202);
  const { requestId } = first.json() as { requestId: string };
  // Still one request per key: the repeat answers the same id.
  const again = await relay(p.slug, "/v1/hook", { key: p.key, body, headers });
  expect(again.json().requestId).toBe(requestId);
  expect((await finishedLog(p, requestId)).status).toBe("delivered");

  const keys = await api<{ keys: { id: string }[] }>(p.ownerToken, "GET", `${p.base}/keys`);
  const [apiKey] = keys.body.keys;
  const call = { project: p.slug, line: "v1", endpoint: "hook", apiKeyId: apiKey?.id ?? "" };
  const unkeyed = await idempotent(
    { ...call, key: "order-1" },
    new TextEncoder().encode(body),
    unkeyedDigest,
  );
  expect(requestId).toMatch(/^req_/);
  expect(requestId).not.toBe(unkeyed.requestId);
});

test("a lane id derived from an ordering key is not the unkeyed hash of it", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: sink.url }], { ordering: "fifo" });
  // Paused, the request stays in its lane, where its id can be read.
  await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints/hook/targets/t/pause`);
  const answer = await relay(p.slug, "/v1/hook", {
    key: p.key,
    body: "{}",
    headers: { "relay-ordering-key": "customer-42" },
  });
  expect(answer.status).toBe(202);
  const { requestId } = answer.json() as { requestId: string };
  const entry = await eventually(async () => {
    const [row] = await sql<{ laneId: string }[]>`
      select lane_id from lane_entries where request_id = ${requestId}`;
    return row;
  });
  const unkeyed = await laneIdOf(
    p.slug,
    { line: "v1", path: "hook" },
    "customer-42",
    unkeyedDigest,
  );
  expect(entry.laneId).toMatch(new RegExp(`^lane:${p.slug}:`));
  expect(entry.laneId).not.toBe(unkeyed);
});
