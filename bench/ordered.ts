/**
 * The cost of ordered delivery (issue 28), beside unordered delivery in the same run on one stack
 * of its own: `BENCH_ORDERED_REQUESTS` (1,000) async calls by 10 senders, each sending one call
 * after another, first to an unordered endpoint, then to an ordered one (`ordering: "fifo"`, each
 * sender its own Relay-Ordering-Key), both to the bench target's /sink (200 at once). For each:
 * the 202's latency (p50, p99), how long until all were delivered, and the CPU time per delivery
 * of every stack process (edge, control plane, worker, Temporal, Postgres; Linux's /proc). An
 * ordered call starts its own workflow (never a batch) and joins its lane (signal-with-start),
 * and each delivery then takes a `go` and a `done` through the lane's workflow.
 * `npm run bench:ordered`; the figures go in docs/benchmarks.md, "Ordered delivery".
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { connect } from "../store/db.ts";
import { benchStack, managementPost, percentile, runBench, unlimitProject } from "./harness.ts";
import { STACK_PROCESSES, stackCpu } from "./publish.ts";

const REQUESTS = Number(process.env.BENCH_ORDERED_REQUESTS ?? 1000);
const SENDERS = 10;

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-ordered-"));
  cleanup.add(() => rm(dir, { recursive: true, force: true }));
  const { stack, targetPort } = await benchStack(cleanup, dir);
  const sql = connect(stack.databaseUrl, { max: 2 });
  cleanup.add(() => sql.end());
  const call = managementPost(stack.controlUrl);
  const slug = "ordered";
  const base = `/projects/${slug}`;
  const { ownerToken = "" } = await call(stack.secrets.adminToken, "/projects", {
    slug,
    name: slug,
    plan: "paid",
  });
  await unlimitProject(stack.controlUrl, stack.secrets.adminToken, slug);
  await call(ownerToken, `${base}/lines`, { key: "v1" });
  for (const ordering of ["none", "fifo"]) {
    await call(ownerToken, `${base}/lines/v1/endpoints`, {
      path: ordering,
      targets: [{ name: "sink", targetUrl: `http://127.0.0.1:${targetPort}/sink` }],
      rateLimit: { requestsPerSecond: 1_000_000, burst: 1_000_000 },
      ordering,
    });
  }
  await call(stack.secrets.adminToken, `${base}/credits`, { pool: "live", amount: 4 * REQUESTS });
  const { plaintext: key } = await call(ownerToken, `${base}/keys`, { name: "b", mode: "live" });
  const cpu = stackCpu(stack);
  const delivered = async () => {
    const [row] = await sql<{ count: number }[]>`
      select count(*)::int as count from requests where status = 'delivered'`;
    return row?.count ?? 0;
  };

  const rows: string[] = [];
  let deliveredBefore = 0;
  for (const ordering of ["none", "fifo"]) {
    const latencies: number[] = [];
    const cpuStart = await cpu();
    const started = performance.now();
    await Promise.all(
      Array.from({ length: SENDERS }, async (_, sender) => {
        for (let n = 0; n < REQUESTS / SENDERS; n++) {
          const sentAt = performance.now();
          const answer = await request(`${stack.edgeUrl}/v1/${ordering}`, {
            method: "POST",
            headers: {
              host: `${slug}.localhost`,
              authorization: `Bearer ${key}`,
              "content-type": "application/json",
              "relay-ordering-key": `sender-${sender}`,
            },
            body: JSON.stringify({ sender, n }),
          });
          await answer.body.dump();
          if (answer.statusCode !== 202) throw new Error(`the edge answered ${answer.statusCode}`);
          latencies.push(performance.now() - sentAt);
        }
      }),
    );
    while ((await delivered()) < deliveredBefore + REQUESTS) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const seconds = (performance.now() - started) / 1000;
    deliveredBefore += REQUESTS;
    const cpuEnd = await cpu();
    const perDelivery = STACK_PROCESSES.map(
      (name) => `${name} ${((cpuEnd[name] - cpuStart[name]) / REQUESTS).toFixed(2)}`,
    );
    const total = STACK_PROCESSES.reduce((sum, name) => sum + cpuEnd[name] - cpuStart[name], 0);
    rows.push(
      `| ${ordering} | ${percentile(latencies, 0.5).toFixed(1)} | ${percentile(latencies, 0.99).toFixed(1)} | ` +
        `${(REQUESTS / seconds).toFixed(1)} | ${(total / REQUESTS).toFixed(2)} | ${perDelivery.join(", ")} |`,
    );
  }
  console.log(`${REQUESTS} async calls each, ${SENDERS} senders one call at a time each`);
  console.log(
    "| ordering | 202 p50 ms | 202 p99 ms | delivered/s | CPU ms per delivery | by process (ms) |",
  );
  console.log("|---|---|---|---|---|---|");
  for (const row of rows) console.log(row);
});
