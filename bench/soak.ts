/**
 * Soak (not part of npm test): SOAK_REQUESTS requests to a target that fails 30% of attempts at
 * random (503); every request must end delivered. Prints the attempts it took and how long the
 * queue took to drain. Retries are shrunk (first 100 ms, at most 2 s apart) so it ends in minutes.
 *
 * With SOAK_OUTAGE_SECONDS (`npm run soak:outage`: 1,000 requests, 60 s) the target is down
 * (503) for that long instead, and the requests are sent evenly across the outage: its circuit
 * opens, the deliveries wait, probes alone reach it, and once it is up they drain. Prints the
 * attempts the target got while down beside the probes the circuit made.
 */

import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { request } from "undici";
import { freeStackPorts, startStack } from "../dev/stack.ts";
import { unlimitProject } from "./harness.ts";

const total = Number(process.env.SOAK_REQUESTS ?? 500);
const outageMs = Number(process.env.SOAK_OUTAGE_SECONDS ?? 0) * 1000;
const failureRate = outageMs > 0 ? 0 : Number(process.env.SOAK_FAILURE_RATE ?? 0.3);

const delivered = new Set<string>();
let attempts = 0;
let attemptsWhileDown = 0;
/** When the outage ends; set as the first request is sent. */
let upAt = Number.POSITIVE_INFINITY;
const target = createServer((req, res) => {
  req.resume();
  attempts++;
  if (Date.now() < upAt && outageMs > 0) {
    attemptsWhileDown++;
    return res.writeHead(503).end();
  }
  if (Math.random() < failureRate) return res.writeHead(503).end();
  delivered.add(String(req.headers["x-relay-request-id"]));
  res.end("ok");
});
await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));

const dir = await mkdtemp(join(tmpdir(), "relay-soak-"));
const ports = await freeStackPorts();
const stack = await startStack({
  dir,
  ports,
  output: join(dir, "stack.log"),
  env: {
    RELAY_RETRY_INITIAL_MS: "100",
    RELAY_RETRY_MAX_INTERVAL_MS: "2000",
    RELAY_INITIAL_CREDITS: "1000000",
  },
});
try {
  const call = async (token: string, path: string, body: unknown) => {
    const response = await request(`${stack.controlUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    return (await response.body.json()) as Record<string, string>;
  };
  const { ownerToken = "" } = await call(stack.secrets.adminToken, "/projects", {
    slug: "soak",
    name: "soak",
    plan: "paid",
  });
  await unlimitProject(stack.controlUrl, stack.secrets.adminToken, "soak");
  await call(ownerToken, "/projects/soak/lines", { key: "v1" });
  await call(ownerToken, "/projects/soak/lines/v1/endpoints", {
    path: "hook",
    targets: [
      {
        name: "flaky",
        targetUrl: `http://127.0.0.1:${(target.address() as { port: number }).port}/in`,
      },
    ],
    rateLimit: { requestsPerSecond: 100_000, burst: 100_000 },
  });
  const { plaintext = "" } = await call(ownerToken, "/projects/soak/keys", {
    name: "k",
    mode: "live",
  });

  const started = Date.now();
  upAt = outageMs > 0 ? started + outageMs : 0;
  const ids: string[] = [];
  for (let i = 0; i < total; i++) {
    // Across the outage, evenly: most requests come while the circuit is open.
    const due = started + (i * outageMs) / total;
    if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
    const answer = await request(`${stack.edgeUrl}/v1/hook`, {
      method: "POST",
      headers: {
        host: `soak.localhost:${ports.edge}`,
        authorization: `Bearer ${plaintext}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ i }),
    });
    if (answer.statusCode !== 202)
      throw new Error(`request ${i}: ${answer.statusCode} ${await answer.body.text()}`);
    ids.push(((await answer.body.json()) as { requestId: string }).requestId);
  }
  const accepted = Date.now();
  const sql = postgres(stack.databaseUrl, { max: 1 });
  const deadline = Date.now() + 15 * 60_000;
  let settled = 0;
  while (Date.now() < deadline) {
    const [row] = await sql<
      { n: number }[]
    >`select count(*)::int as n from requests where status = 'delivered'`;
    settled = row?.n ?? 0;
    if (settled === total) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  const drained = Date.now();
  const [logged] = await sql<{ n: number }[]>`select count(*)::int as n from attempts`;
  const events = await sql<{ event: string; n: number }[]>`
    select event, count(*)::int as n from circuit_events group by event order by event`;
  await sql.end();

  const lost = ids.filter((id) => !delivered.has(id)).length;
  console.log(
    outageMs > 0
      ? `\nSoak: ${total} requests sent across a ${outageMs / 1000} s outage of the target (503), then up\n`
      : `\nSoak: ${total} requests, target failing ${failureRate * 100}% of attempts at random\n`,
  );
  console.log(
    "| requests | 202s | delivered (log) | delivered (target) | attempts (target) | attempts (log) | lost | accept s | drain s |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  console.log(
    `| ${total} | ${ids.length} | ${settled} | ${delivered.size} | ${attempts} | ${logged?.n} | ${lost} | ${((accepted - started) / 1000).toFixed(1)} | ${((drained - started) / 1000).toFixed(1)} |`,
  );
  if (outageMs > 0) {
    const count = (event: string) => events.find((e) => e.event === event)?.n ?? 0;
    console.log(
      `\n| attempts while down | circuit opened | probes failed | recovered |\n|---|---|---|---|\n| ${attemptsWhileDown} | ${count("opened")} | ${count("probe_failed")} | ${count("recovered")} |`,
    );
  }
  if (lost > 0 || settled !== total) process.exitCode = 1;
} finally {
  await stack.stop();
  target.close();
  await rm(dir, { recursive: true, force: true });
}
