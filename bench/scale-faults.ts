/**
 * Scale-out with faults (docs/benchmarks.md "Scale-out with faults"; `npm run soak:cluster`): a
 * stack on Temporal's own server (PostgreSQL, 4 history shards) with a second edge, control plane
 * and worker beside it, all supervised. A caller sends FAULTS_REQUESTS async calls at
 * FAULTS_RATE a second, round robin over the two edges, to a target that counts deliveries by
 * X-Relay-Delivery-Id. The calls are of every kind a sender makes (`MIX`): plain, to three targets,
 * ordered by key, with a 32 KiB body, delayed 2 s; each with an Idempotency-Key, and every 202
 * must reach each of its endpoint's targets. Meanwhile an edge, a control plane, a worker and the Temporal server are
 * each `kill -9`ed once, spaced out, and restarted by their supervision; and a few times a key is
 * minted, used on both edges, revoked, and tried again on every live edge the moment its DELETE
 * returns (it must be refused). A refused call is retried as docs/api.md has callers do: with the
 * same Idempotency-Key, on the other edge, after Retry-After. Every 202 must be delivered within
 * FAULTS_DRAIN_SECONDS (lost 0); duplicates are counted.
 *
 *   FAULTS_REQUESTS (10000), FAULTS_RATE (40 a second), FAULTS_DRAIN_SECONDS (600)
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { request } from "undici";
import { freePorts } from "../dev/ports.ts";
import { freeStackPorts, startStack } from "../dev/stack.ts";
import {
  countWorkflows,
  madeAgainByCause,
  managerOf,
  servingAgain,
  startSecondOfEach,
  supervisorRestarts,
  temporalServerPid,
} from "./fault-cluster.ts";
import { kindOf, MIX, mixTarget } from "./fault-mix.ts";
import { runBench, UNLIMITED_RATE } from "./harness.ts";

/** RELAY_TEMPORAL_SERVER=cluster: Temporal as two server nodes behind a balancer, one killed. */
const cluster = process.env.RELAY_TEMPORAL_SERVER === "cluster";
const temporalShape = `Temporal's own server (PostgreSQL, 4 shards${cluster ? ", two nodes" : ""})`;
const total = Number(process.env.FAULTS_REQUESTS ?? 10_000);
const rate = Number(process.env.FAULTS_RATE ?? 40);
const drainMs = Number(process.env.FAULTS_DRAIN_SECONDS ?? 600) * 1000;
/** A call refused this many times, or for this long, counts as refused (the caller gives up). */
const MAX_TRIES = 10;
const GIVE_UP_MS = 60_000;
/** Calls in flight at most: past it the caller waits (it never queues without bound). */
const MAX_IN_FLIGHT = 256;
/** Where in the run (the share of calls sent) each kind of process is killed. */
const KILLS = [
  { at: 0.2, kind: "edge" },
  { at: 0.4, kind: "control plane" },
  { at: 0.6, kind: "worker" },
  { at: 0.8, kind: "temporal server" },
] as const;
/** Revocation rounds: one before any kill, and one just after each kill. */
const REVOCATIONS = [0.1, 0.21, 0.41, 0.61, 0.81];

const { server: target, deliveries, reached, again, lastFirst } = mixTarget();

const seconds = (ms: number) => (ms / 1000).toFixed(1);
const count = (counts: Map<string, number>, key: string) =>
  counts.set(key, (counts.get(key) ?? 0) + 1);
const show = (counts: Map<string, number>) =>
  [...counts]
    .sort((a, b) => b[1] - a[1])
    .map(([key, n]) => `${key}: ${n}`)
    .join("; ") || "none";

await runBench(async (cleanup) => {
  await new Promise<void>((resolve) => target.listen(0, "127.0.0.1", resolve));
  cleanup.add(() => new Promise((resolve) => target.close(() => resolve())));
  const targetUrl = `http://127.0.0.1:${(target.address() as { port: number }).port}`;
  const dir = await mkdtemp(join(tmpdir(), "relay-faults-"));
  // FAULTS_KEEP_DIR=1 keeps the stack's folder and its logs for a look after the run.
  if (process.env.FAULTS_KEEP_DIR !== "1")
    cleanup.add(() => rm(dir, { recursive: true, force: true }));

  const gaveUp: string[] = [];
  const ports = await freeStackPorts();
  const [control2Port = 0, worker2Port = 0, edge2Port = 0] = await freePorts(3);
  const edgePorts = [ports.edge, edge2Port];
  console.log(`starting the stack on ${temporalShape} in ${dir}`);
  const stack = await startStack({
    dir,
    ports,
    output: join(dir, "stack.log"),
    temporalServer: cluster ? "cluster" : "postgres",
    // Workers must know every edge they could loop back to.
    env: { RELAY_EDGE_LISTENERS: edgePorts.map((p) => `127.0.0.1:${p}`).join(",") },
    supervise: { onGiveUp: (reason) => gaveUp.push(reason) },
  });
  cleanup.add(() => stack.stop());
  const second = await startSecondOfEach(cleanup, dir, stack, {
    control: control2Port,
    worker: worker2Port,
    edge: edge2Port,
    listeners: edgePorts,
    edgeDomain: `localhost:${ports.edge}`,
    onGiveUp: (reason) => gaveUp.push(reason),
  });

  const manage = managerOf([stack.controlUrl, `http://127.0.0.1:${control2Port}`]);
  const slug = "faults";
  const { ownerToken } = await manage(stack.secrets.adminToken, "POST", "/projects", {
    slug,
    name: slug,
    plan: "paid",
  });
  const base = `/projects/${slug}`;
  await manage(stack.secrets.adminToken, "PUT", `${base}/limits`, { rateLimit: UNLIMITED_RATE });
  await manage(ownerToken, "POST", `${base}/lines`, { key: "v1" });
  const unlimited = UNLIMITED_RATE;
  const endpoints = [
    ...MIX.filter((kind, i) => MIX.findIndex((k) => k.endpoint === kind.endpoint) === i),
    { endpoint: "probe", targets: ["probe"] },
  ];
  for (const { endpoint, targets } of endpoints) {
    await manage(ownerToken, "POST", `${base}/lines/v1/endpoints`, {
      path: endpoint,
      // The probe's target is not counted: its calls are the revocation rounds'.
      targets: targets.map((name) => ({
        name,
        targetUrl: `${targetUrl}/${endpoint === "probe" ? "probe" : `in/${name}`}`,
      })),
      rateLimit: unlimited,
      ...(endpoint === "ordered" && { ordering: "fifo" }),
    });
  }
  await manage(stack.secrets.adminToken, "POST", `${base}/credits`, {
    pool: "live",
    amount: 10 * total,
  });
  const { plaintext: key } = await manage(ownerToken, "POST", `${base}/keys`, {
    name: "load",
    mode: "live",
  });

  /** One call to an edge: its status, or the error's code when no answer came. */
  const call = async (edge: number, path: string, apiKey: string, headers = {}, body = "{}") => {
    const port = edgePorts[edge] as number;
    return request(`http://127.0.0.1:${port}/v1/${path}`, {
      method: "POST",
      headers: {
        host: `${slug}.localhost:${ports.edge}`,
        authorization: `Bearer ${apiKey}`,
        "content-type": "application/json",
        ...headers,
      },
      body,
      headersTimeout: 30_000,
    }).then(
      async (r) => {
        const text = await r.body.text();
        const retryAfter = Number(r.headers["retry-after"] ?? 0);
        return { status: String(r.statusCode), text, retryAfter };
      },
      (error: { code?: string }) => ({ status: error.code ?? "error", text: "", retryAfter: 0 }),
    );
  };

  // Both edges take the key before the clock starts.
  for (const edge of [0, 1]) {
    const warm = await call(edge, "probe", key);
    if (warm.status !== "202") throw new Error(`edge ${edge + 1}: ${warm.status} ${warm.text}`);
  }

  console.log(`${total} calls at ${rate}/s round robin over 2 edges`);
  const t0 = Date.now();
  /** Answers refused on the way, by status; calls that gave up; request ids of the 202s. */
  const refusals = new Map<string, number>();
  const refused = new Map<string, number>();
  /** Request ids of the 202s, and the kind of call each was (the targets it must reach). */
  const accepted = new Map<string, ReturnType<typeof kindOf>>();
  let retriedThenAccepted = 0;
  /** 202s and refusals by the 10 s of the run they were answered in. */
  const timeline: { accepted: number; refused: number }[] = [];
  const tally = (what: "accepted" | "refused") => {
    const slot = Math.floor((Date.now() - t0) / 10_000);
    for (let s = timeline.length; s <= slot; s++) timeline.push({ accepted: 0, refused: 0 });
    (timeline[slot] as { accepted: number; refused: number })[what]++;
  };
  const send = async (i: number) => {
    const started = Date.now();
    for (let tries = 0; ; tries++) {
      // The other edge on each retry, as a load balancer would.
      const kind = kindOf(i);
      const answer = await call(
        (i + tries) % 2,
        kind.endpoint,
        key,
        { "idempotency-key": `call-${i}`, ...("headers" in kind && kind.headers(i)) },
        JSON.stringify({ i, ...("pad" in kind && { pad: "x".repeat(kind.pad) }) }),
      );
      if (answer.status === "202") {
        accepted.set(JSON.parse(answer.text).requestId, kind);
        tally("accepted");
        if (tries > 0) retriedThenAccepted++;
        return;
      }
      tally("refused");
      // By status and the error body's message: which process or dependency refused.
      count(
        refusals,
        `${answer.status} ${answer.text.match(/"message":"([^"]*)"/)?.[1] ?? ""}`.trim(),
      );
      const worthRetrying = !/^4(?!29)/.test(answer.status);
      if (!worthRetrying || tries + 1 >= MAX_TRIES || Date.now() - started > GIVE_UP_MS) {
        count(refused, answer.status);
        return;
      }
      await sleep(Math.min(2000, answer.retryAfter * 1000 || 200 * 2 ** tries));
    }
  };

  const processes = {
    edge: { name: "edge-2", process: second.edge, health: `http://127.0.0.1:${edge2Port}/healthz` },
    "control plane": {
      name: "control (the first)",
      process: stack.processes.control,
      health: `${stack.controlUrl}/healthz`,
    },
    worker: {
      name: "worker-2",
      process: second.worker,
      health: `http://127.0.0.1:${worker2Port}/healthz`,
    },
    // A cluster's first node: back once it serves on its own port, not the balancer's.
    "temporal server": {
      name: cluster ? "temporal server (the first of two nodes)" : "temporal server",
      process: null,
      health: `${stack.temporal.nodeHttpAddresses?.[0] ?? stack.temporal.httpAddress}/api/v1/system-info`,
    },
  };
  const kills: { kind: string; name: string; pid: number; atS: string; backAfterS: string }[] = [];
  const kill = async (kind: keyof typeof processes) => {
    const { name, process: managed, health } = processes[kind];
    const pid = managed?.child?.pid ?? (await temporalServerPid(dir));
    if (!pid) throw new Error(`no pid for ${name}`);
    const at = Date.now();
    // What `kill -9` does; the supervisor sees a crash and restarts it.
    process.kill(pid, "SIGKILL");
    console.log(`${seconds(at - t0)} s: kill -9 ${name} (pid ${pid})`);
    await servingAgain(health);
    const back = Date.now();
    console.log(`${seconds(back - t0)} s: ${name} serves again`);
    kills.push({ kind, name, pid, atS: seconds(at - t0), backAfterS: seconds(back - at) });
  };

  const revocations: {
    atS: string;
    warm: string[];
    deleteMs: number;
    after: string[];
    violated: boolean;
  }[] = [];
  const revocationRound = async () => {
    const at = Date.now();
    const minted = await manage(ownerToken, "POST", `${base}/keys`, {
      name: "revoked",
      mode: "live",
    });
    const warm = await Promise.all([0, 1].map((edge) => call(edge, "probe", minted.plaintext)));
    const deleting = Date.now();
    await manage(ownerToken, "DELETE", `${base}/keys/${minted.key.id}`);
    const deleteMs = Date.now() - deleting;
    const after = await Promise.all([0, 1].map((edge) => call(edge, "probe", minted.plaintext)));
    // An edge that answers must refuse; one that does not answer (restarting) serves nothing.
    const violated = after.some((a) => /^2/.test(a.status));
    const detail = (a: { status: string; text: string }) =>
      /^\d/.test(a.status)
        ? `${a.status} ${a.text.match(/"code":"(\w+)"/)?.[1] ?? ""}`.trim()
        : `no answer (${a.status})`;
    revocations.push({
      atS: seconds(at - t0),
      warm: warm.map(detail),
      deleteMs,
      after: after.map(detail),
      violated,
    });
    console.log(`${seconds(Date.now() - t0)} s: revocation: ${JSON.stringify(revocations.at(-1))}`);
  };

  const background: Promise<void>[] = [];
  const inFlight = new Set<Promise<void>>();
  const due = [
    ...KILLS.map((k) => ({ at: k.at, run: () => kill(k.kind) })),
    ...REVOCATIONS.map((at) => ({ at, run: revocationRound })),
  ];
  for (let i = 0; i < total; i++) {
    for (const event of due.filter((e) => Math.floor(e.at * total) === i)) {
      background.push(event.run());
    }
    const wait = t0 + (i * 1000) / rate - Date.now();
    if (wait > 0) await sleep(wait);
    while (inFlight.size >= MAX_IN_FLIGHT) await Promise.race(inFlight);
    const sending = send(i).finally(() => inFlight.delete(sending));
    inFlight.add(sending);
  }
  const sentIn = Date.now() - t0;
  await Promise.all(inFlight);
  const answeredIn = Date.now() - t0;
  await Promise.all(background);
  console.log(`${seconds(answeredIn)} s: every call answered; draining`);
  const drainDeadline = Date.now() + drainMs;
  const undelivered = () =>
    [...accepted]
      .filter(([id, kind]) => (reached.get(id)?.size ?? 0) < kind.targets.length)
      .map(([id]) => id);
  while (undelivered().length > 0 && Date.now() < drainDeadline) await sleep(1000);
  const drainedIn = Date.now() - t0;
  // Late duplicates of attempts still in flight, if any, land within a few seconds.
  await sleep(5000);

  const lost = undelivered();
  const batchWorkflows = await countWorkflows(stack, "deliverBatch");
  const targetCalls = [...deliveries.values()].reduce((a, b) => a + b, 0);
  const restarts = await supervisorRestarts(dir);
  const figures = {
    requests: total,
    accepted: accepted.size,
    refused: [...refused.values()].reduce((a, b) => a + b, 0),
    delivered: accepted.size - lost.length,
    deliveredWithout202: [...reached.keys()].filter((id) => !accepted.has(id)).length,
    lost: lost.length,
    // Calls that arrived together shared batch workflows (edge/batcher.ts): the batched path.
    batchWorkflows,
    targetCalls,
    duplicates: targetCalls - deliveries.size,
    retriedThenAccepted,
  };
  console.log(
    `\nScale-out with faults: ${total} calls at ${rate}/s, 2 edges, 2 control planes, 2 workers, ${temporalShape}\n`,
  );
  console.log(
    "| calls | 202s | refused (gave up) | delivered (unique) | lost | duplicates (by delivery id) | target calls | accepted after a retry | send s | all answered s | drained s |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|---|---|");
  console.log(
    `| ${total} | ${figures.accepted} | ${figures.refused} | ${figures.delivered} | ${figures.lost} | ${figures.duplicates} | ${targetCalls} | ${retriedThenAccepted} | ${seconds(sentIn)} | ${seconds(answeredIn)} | ${seconds(drainedIn)} |`,
  );
  console.log(
    `\nrefusals on the way (every non-202 answer or failed call, retried): ${show(refusals)}`,
  );
  console.log(`calls that gave up, by last answer: ${show(refused)}`);
  console.log(
    `202s / refusals per 10 s of the run: ${timeline.map((t, i) => `${i * 10}: ${t.accepted}/${t.refused}`).join(", ")}`,
  );
  console.log(`delivered without a 202 (the caller had given up): ${figures.deliveredWithout202}`);
  const againBy = (key: (d: (typeof again)[number]) => string) =>
    show(again.reduce((counts, d) => count(counts, key(d)), new Map<string, number>()));
  console.log(`deliveries made again, by target: ${againBy((d) => d.target)}`);
  console.log(
    `deliveries made again, by cause: ${show(await madeAgainByCause(stack.databaseUrl, again))}`,
  );
  console.log(
    `last first delivery, by target (s): ${[...lastFirst].map(([name, at]) => `${name} ${seconds(at - t0)}`).join(", ")}`,
  );
  console.log(
    `deliveries made again, by 10 s of the run: ${againBy((d) => String(Math.floor((d.at - t0) / 10_000) * 10))}`,
  );
  console.log("\n| killed (kill -9) | pid | at s | serving again after s |\n|---|---|---|---|");
  for (const k of kills.sort((a, b) => Number(a.atS) - Number(b.atS)))
    console.log(`| ${k.name} | ${k.pid} | ${k.atS} | ${k.backAfterS} |`);
  console.log(`supervisor restarts in the logs: ${restarts.join("; ")}`);
  console.log(
    "\n| revocation at s | key used on edges 1, 2 | DELETE ms | right after DELETE: edges 1, 2 |\n|---|---|---|---|",
  );
  for (const r of revocations)
    console.log(`| ${r.atS} | ${r.warm.join(", ")} | ${r.deleteMs} | ${r.after.join(", ")} |`);
  console.log(`\nfigures ${JSON.stringify(figures)}`);
  if (lost.length > 0) {
    const kinds = new Map<string, number>();
    for (const id of lost) count(kinds, accepted.get(id)?.name ?? "");
    console.log(`lost, by kind: ${show(kinds)}; ids: ${lost.slice(0, 20).join(" ")}`);
    await writeFile(join(dir, "lost.txt"), `${lost.join("\n")}\n`);
  }
  if (gaveUp.length > 0) console.log(`supervision gave up: ${gaveUp.join("; ")}`);
  if (lost.length > 0 || revocations.some((r) => r.violated) || gaveUp.length > 0) {
    process.exitCode = 1;
  }
});
