/**
 * One project's hanging targets cannot stall another project's deliveries (issue 24, item 1).
 * An attacker holds 50 targets that never answer (3 calls: 150 attempts) and 150 more calls on
 * a target that never answers, each allowed 60 s; a victim on the same worker still gets its
 * async delivery and its sync answer in seconds. Before per-project caps, the attacker's
 * attempts held every local-activity slot for their 60 s, and the victim waited as long.
 */
import { createServer, type Server } from "node:http";
import type { Socket } from "node:net";
import { request } from "undici";
import { afterAll, expect, test } from "vitest";
import {
  api,
  eventually,
  grantCredits,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

/** A customer's endpoint that reads each request and never answers it. */
async function hangingServer() {
  const sockets = new Set<Socket>();
  let requests = 0;
  const server: Server = createServer((req) => {
    requests++;
    req.resume();
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/hang`,
    requests: () => requests,
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const hanging = await hangingServer();
const attackerRequests: { base: string; ownerToken: string; ids: string[] }[] = [];

afterAll(async () => {
  // Closed first, so the attempts in flight fail now (a batch's first attempt cannot be cancelled
  // during it); then cancelled, so the attacker's deliveries stop retrying for the rest of the run.
  await hanging.close();
  await Promise.all(
    attackerRequests.flatMap(({ base, ownerToken, ids }) =>
      ids.map((id) => api(ownerToken, "DELETE", `${base}/requests/${id}`)),
    ),
  );
});

const HANG = { targetUrl: hanging.url, timeoutSeconds: 60 };
/**
 * The attacker's endpoints: no circuit opens on the hanging targets, and no rate limit refuses
 * the calls, not even a share of it (an edge applies 1/N of a limit it has no share of yet, N
 * being the edges live a moment ago: an earlier test's extra edge may still count).
 */
const ATTACKER_ENDPOINT = {
  circuitBreaker: { failureThreshold: 1000 },
  rateLimit: { requestsPerSecond: 1000, burst: 1000 },
};

test("a victim's async delivery and sync answer stay prompt while another project hangs 300 attempts", async () => {
  const fanOut = await projectWithEndpoint(
    Array.from({ length: 50 }, (_, i) => ({ name: `hang-${i}`, ...HANG })),
    ATTACKER_ENDPOINT,
  );
  const slow = await projectWithEndpoint([{ name: "hang", ...HANG }], ATTACKER_ENDPOINT);
  // Every accepted delivery holds its credits: enough for all of them.
  for (const p of [fanOut, slow]) await grantCredits(p.slug, 1000);
  // In tens: the edge bounds each project's workflow starts in flight (a 503 past it).
  const attack = async (p: typeof fanOut, calls: number) => {
    const ids: string[] = [];
    attackerRequests.push({ ...p, ids });
    for (let sent = 0; sent < calls; sent += 10) {
      const answers = await Promise.all(
        Array.from({ length: Math.min(10, calls - sent) }, () =>
          relay(p.slug, "/v1/hook", { key: p.key, body: "{}" }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(answers.map(() => 202));
      ids.push(...answers.map((a) => a.json().requestId as string));
    }
  };
  await attack(fanOut, 3);
  await attack(slow, 150);
  // The attacker's attempts have reached its targets and hang there, as many as its share lets
  // through, and the worker says how many each project has in flight.
  await eventually(async () => hanging.requests() >= 20, 30_000);
  const metrics = await (await request(`${stack().workerUrl}/metrics`)).body.text();
  const inFlight = (slug: string) =>
    Number(
      new RegExp(
        `relay_worker_project_in_flight\\{pool="attempts",project="${slug}"\\} (\\d+)`,
      ).exec(metrics)?.[1] ?? 0,
    );
  expect(inFlight(fanOut.slug) + inFlight(slow.slug)).toBeGreaterThanOrEqual(20);

  const sink = await targetServer();
  const victim = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const victimSync = await projectWithEndpoint([
    { name: "sync", targetUrl: sink.url, deliveryMode: "sync", timeoutSeconds: 10 },
  ]);

  const sentAt = Date.now();
  const queued = await relay(victim.slug, "/v1/hook", { key: victim.key, body: '{"v":1}' });
  expect(queued.status).toBe(202);
  // Well inside the attacker's 60 s: only a worker whose capacity the attacker cannot take
  // delivers it by then.
  await eventually(async () => sink.received.some((r) => r.body === '{"v":1}'), 15_000);
  const deliveredAfterMs = Date.now() - sentAt;

  const syncAt = Date.now();
  const answered = await relay(victimSync.slug, "/v1/hook", { key: victimSync.key, body: "{}" });
  const syncMs = Date.now() - syncAt;
  expect(answered.status).toBe(200);
  expect(syncMs).toBeLessThan(15_000);
  expect(deliveredAfterMs).toBeLessThan(15_000);
  await sink.close();
}, 120_000);
