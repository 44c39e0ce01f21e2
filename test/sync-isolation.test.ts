/**
 * One tenant's slow sync target cannot stall other tenants on the same edge (issue 12, item 9):
 * sync calls wait for their answers on a connection pool of their own, and each project may have
 * only RELAY_SYNC_MAX_PER_PROJECT of them in flight on an edge; the next is a 503 with
 * Retry-After. A second edge with a tiny start pool and bound makes both visible: had the sync
 * waits shared the start pool, its two connections would be held by them and no call queue.
 */
import { createServer } from "node:http";
import { afterAll, beforeAll, expect, test, vi } from "vitest";
import { freePorts } from "../dev/ports.ts";
import { extraEdge, projectWithEndpoint, relay, targetServer } from "./helpers.ts";

const BOUND = 3;
const [edgePort = 0] = await freePorts(1);
const edge = extraEdge("edge-sync-bound", edgePort, {
  RELAY_ALLOW_PRIVATE_TARGETS: "1",
  RELAY_SYNC_MAX_PER_PROJECT: String(BOUND),
  RELAY_TEMPORAL_CONNECTIONS: "2",
});
const throughEdge = { edgeUrl: `http://127.0.0.1:${edgePort}`, edgePort };

// A sync target that holds every call until the test opens it.
const held: (() => void)[] = [];
let open = false;
const gate = createServer((req, res) => {
  req.resume();
  const answer = () => res.end('{"answered":true}');
  if (open) answer();
  else held.push(answer);
});
await new Promise<void>((resolve) => gate.listen(0, "127.0.0.1", resolve));
const gateUrl = `http://127.0.0.1:${(gate.address() as { port: number }).port}/slow`;

beforeAll(() => edge.start());
afterAll(async () => {
  open = true;
  for (const answer of held) answer();
  await edge.stop();
  await new Promise((resolve) => gate.close(resolve));
});

test("sync calls over a project's bound are 503 with Retry-After; other projects' 202s go on meanwhile", async () => {
  // Shorter than Temporal's 20 s long-poll cycle: on a shared pool, nothing else would start
  // before these calls time out.
  const slow = await projectWithEndpoint([
    { name: "slow", targetUrl: gateUrl, deliveryMode: "sync", timeoutSeconds: 10 },
  ]);
  const sink = await targetServer();
  const other = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const call = (p: { slug: string; key: string }) =>
    relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: throughEdge });

  let syncAnswered = 0;
  const syncCalls = Array.from({ length: BOUND + 2 }, () =>
    call(slow).then((answer) => {
      syncAnswered++;
      return answer;
    }),
  );
  // BOUND calls reach the target and wait there; the two over the bound are refused at once.
  await vi.waitFor(
    () => {
      expect(held).toHaveLength(BOUND);
      expect(syncAnswered).toBe(2);
    },
    { timeout: 30_000 },
  );

  const queued = await Promise.all(Array.from({ length: 4 }, () => call(other)));
  expect(queued.map((answer) => answer.status)).toEqual([202, 202, 202, 202]);
  // Answered while every admitted sync call was still waiting on its target.
  expect(syncAnswered).toBe(2);

  for (const answer of held.splice(0)) answer();
  open = true;
  const answers = await Promise.all(syncCalls);
  const refused = answers.filter((answer) => answer.status === 503);
  expect(answers.filter((answer) => answer.status === 200)).toHaveLength(BOUND);
  expect(refused).toHaveLength(2);
  for (const answer of refused) {
    expect(answer.headers["retry-after"]).toBe("1");
    expect(answer.json()).toEqual({
      error: {
        code: "unavailable",
        message: "this project has too many sync calls in flight; retry",
      },
    });
  }
  // The slots come back with the answers.
  expect((await call(slow)).status).toBe(200);
  await sink.close();
}, 60_000);
