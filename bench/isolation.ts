/**
 * Noisy neighbours (`npm run bench:isolation`): one stack, a victim project measured alone and
 * then beside an attacker doing each of issue 24's three things on the same worker, one phase
 * each, and all three at once:
 * - hanging targets: an endpoint of 50 targets that never answer (60 s timeout, a circuit that
 *   does not open before 1,000 failures), called 3 times: 150 attempts hang;
 * - slow calls: 150 calls to a target that answers after 40 s;
 * - hanging notifications: 150 requests that fail at once, to a project whose notification URL
 *   never answers.
 * The victim sends, for BENCH_SECONDS each phase: an async call every 200 ms (202 to the
 * target's receipt), sync calls one after another (call to answer), and a call a second to a
 * target that fails each request's first attempt (202 to the retry's receipt). Prints p50 and
 * p99 of each and their ratios to the phase alone, and writes bench/results/isolation.json.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { freeStackPorts, type Stack, startStack } from "../dev/stack.ts";
import { type Cleanup, percentile, quick, runBench, UNLIMITED_RATE } from "./harness.ts";

const seconds = Number(process.env.BENCH_SECONDS ?? (quick ? 5 : 15));
const ATTACK_CALLS = 150;

type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A customer's server in this process; its sockets are destroyed when the bench stops. */
async function server(cleanup: Cleanup, handle: Handler): Promise<string> {
  const sockets = new Set<Socket>();
  const listening = createServer((req, res) => {
    req.resume();
    req.on("end", () => handle(req, res));
  });
  listening.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => listening.listen(0, "127.0.0.1", resolve));
  cleanup.add(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => listening.close(resolve));
  });
  return `http://127.0.0.1:${(listening.address() as { port: number }).port}`;
}

/** The control plane's REST API as `token`. */
function controlApi(stack: Stack) {
  return async (token: string, method: string, path: string, body?: unknown) => {
    const response = await request(`${stack.controlUrl}${path}`, {
      method: method as "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await response.body.text();
    if (response.statusCode >= 300) throw new Error(`${method} ${path}: ${text}`);
    return (text ? JSON.parse(text) : {}) as Record<string, unknown>;
  };
}

type Api = ReturnType<typeof controlApi>;
interface Project {
  slug: string;
  owner: string;
  key: string;
}

let projects = 0;
/** A project with line v1, the endpoints named (path -> targets), no rate limit, a live key. */
async function project(api: Api, adminToken: string, endpoints: Record<string, unknown[]>) {
  const slug = `iso${projects++}`;
  const { ownerToken } = await api(adminToken, "POST", "/projects", {
    slug,
    name: slug,
    plan: "paid",
  });
  const owner = ownerToken as string;
  // Every accepted delivery holds its credits until it settles: room for all of the bench's.
  await api(adminToken, "POST", `/projects/${slug}/credits`, { pool: "live", amount: 1_000_000 });
  await api(adminToken, "PUT", `/projects/${slug}/limits`, { rateLimit: UNLIMITED_RATE });
  await api(owner, "POST", `/projects/${slug}/lines`, { key: "v1" });
  for (const [path, targets] of Object.entries(endpoints)) {
    await api(owner, "POST", `/projects/${slug}/lines/v1/endpoints`, {
      path,
      targets,
      rateLimit: { requestsPerSecond: 100_000, burst: 100_000 },
      circuitBreaker: { failureThreshold: 1000 },
    });
  }
  const { plaintext } = await api(owner, "POST", `/projects/${slug}/keys`, {
    name: "k",
    mode: "live",
  });
  return { slug, owner, key: plaintext as string };
}

function caller(stack: Stack, edgePort: number) {
  return async (p: Project, path: string) => {
    const response = await request(`${stack.edgeUrl}${path}`, {
      method: "POST",
      headers: {
        host: `${p.slug}.localhost:${edgePort}`,
        authorization: `Bearer ${p.key}`,
        "content-type": "application/json",
      },
      body: "{}",
    });
    const text = await response.body.text();
    return { status: response.statusCode, requestId: response.headers["x-relay-request-id"], text };
  };
}
type Call = ReturnType<typeof caller>;

interface Figures {
  p50: number;
  p99: number;
  n: number;
}
const figures = (ms: number[]): Figures => ({
  p50: Math.round(percentile(ms, 0.5)),
  p99: Math.round(percentile(ms, 0.99)),
  n: ms.length,
});

/** The victim's receipts: each resolves its request's wait, also when it came before the 202. */
class Receipts {
  private readonly waiting = new Map<string, () => void>();
  private readonly early = new Set<string>();

  received(id: string): void {
    const resolve = this.waiting.get(id);
    if (resolve) resolve();
    else this.early.add(id);
  }

  /** Resolves on the receipt, or after `timeoutMs` (a delivery counted as late as that). */
  wait(id: string, timeoutMs: number): Promise<void> {
    if (this.early.delete(id)) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.waiting.set(id, () => {
        clearTimeout(timer);
        this.waiting.delete(id);
        resolve();
      });
    });
  }
}

/** How long the bench waits for one of the victim's deliveries before it counts it that late. */
const LATE_MS = 90_000;

/** `calls` calls to `path`, ten at a time (the edge bounds a project's starts in flight). */
async function flood(call: Call, p: Project, path: string, calls: number): Promise<string[]> {
  const ids: string[] = [];
  for (let sent = 0; sent < calls; sent += 10) {
    const answers = await Promise.all(
      Array.from({ length: Math.min(10, calls - sent) }, () => call(p, path)),
    );
    for (const answer of answers) if (answer.requestId) ids.push(String(answer.requestId));
  }
  return ids;
}

/** The victim's three measures, side by side for `seconds`. */
async function measureVictim(call: Call, victim: Project, receipts: Receipts) {
  const until = Date.now() + seconds * 1000;
  const delivered = (path: string, everyMs: number) => async () => {
    const ms: number[] = [];
    const inFlight: Promise<void>[] = [];
    while (Date.now() < until) {
      inFlight.push(
        (async () => {
          const sentAt = performance.now();
          const answer = await call(victim, path);
          if (answer.status !== 202) return;
          await receipts.wait(String(answer.requestId), LATE_MS);
          ms.push(performance.now() - sentAt);
        })(),
      );
      await new Promise((resolve) => setTimeout(resolve, everyMs));
    }
    await Promise.all(inFlight);
    return figures(ms);
  };
  const sync = async () => {
    const ms: number[] = [];
    while (Date.now() < until) {
      const sentAt = performance.now();
      const answer = await call(victim, "/v1/sync");
      if (answer.status === 200) ms.push(performance.now() - sentAt);
    }
    return figures(ms);
  };
  const [async, answered, retried] = await Promise.all([
    delivered("/v1/async", 200)(),
    sync(),
    delivered("/v1/flaky", 1000)(),
  ]);
  return { async, sync: answered, retried };
}

function line(phase: string, r: Record<string, Figures>, alone?: Record<string, Figures>): string {
  const cell = (name: string) => {
    const f = r[name];
    const base = alone?.[name];
    if (!f) return "";
    const ratio =
      base && base !== f
        ? ` (${(f.p50 / base.p50).toFixed(2)}x, ${(f.p99 / base.p99).toFixed(2)}x)`
        : "";
    return `${name} p50 ${f.p50} ms p99 ${f.p99} ms n=${f.n}${ratio}`;
  };
  return `${phase.padEnd(22)} ${["async", "sync", "retried"].map(cell).join(" | ")}`;
}

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-bench-isolation-"));
  cleanup.add(() => rm(dir, { recursive: true, force: true }));
  const ports = await freeStackPorts();
  const starting = startStack({ dir, ports, output: join(dir, "stack.log") });
  cleanup.add(async () => (await starting.catch(() => null))?.stop());
  const stack = await starting;
  const api = controlApi(stack);
  const call = caller(stack, ports.edge);

  const receipts = new Receipts();
  const sink = await server(cleanup, (req, res) => {
    if (req.url === "/flaky" && req.headers["x-relay-attempt"] === "1") {
      res.writeHead(503).end();
      return;
    }
    receipts.received(String(req.headers["x-relay-request-id"]));
    res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
  });
  // The attacker's side.
  const hanging = await server(cleanup, () => {});
  const slow = await server(cleanup, (_req, res) => {
    setTimeout(() => res.writeHead(200).end(), 40_000);
  });
  const rejecting = await server(cleanup, (_req, res) => res.writeHead(400).end());

  const victim = await project(api, stack.secrets.adminToken, {
    async: [{ name: "sink", targetUrl: `${sink}/sink` }],
    sync: [{ name: "sync", targetUrl: `${sink}/sync`, deliveryMode: "sync" }],
    flaky: [{ name: "flaky", targetUrl: `${sink}/flaky` }],
  });
  const attacker = await project(api, stack.secrets.adminToken, {
    fan: Array.from({ length: 50 }, (_, i) => ({
      name: `hang-${i}`,
      targetUrl: hanging,
      timeoutSeconds: 60,
    })),
    slow: [{ name: "slow", targetUrl: slow, timeoutSeconds: 60 }],
    reject: [{ name: "reject", targetUrl: rejecting }],
  });

  const attacks = {
    "hanging targets": () => flood(call, attacker, "/v1/fan", 3),
    "slow calls": () => flood(call, attacker, "/v1/slow", ATTACK_CALLS),
    "hanging notifications": async () => {
      await api(attacker.owner, "PUT", `/projects/${attacker.slug}/notifications`, {
        url: hanging,
      });
      return flood(call, attacker, "/v1/reject", ATTACK_CALLS);
    },
  };
  const phases: Record<string, (() => Promise<string[]>)[]> = {
    alone: [],
    ...Object.fromEntries(Object.entries(attacks).map(([name, attack]) => [name, [attack]])),
    "all three": Object.values(attacks),
  };
  const results: Record<string, Record<string, Figures>> = {};
  for (const [phase, attacking] of Object.entries(phases)) {
    const ids = (await Promise.all(attacking.map((attack) => attack()))).flat();
    // Let the attacker's attempts reach its targets and hang there first.
    if (ids.length > 0) await new Promise((resolve) => setTimeout(resolve, 3000));
    results[phase] = await measureVictim(call, victim, receipts);
    console.log(line(phase, results[phase], results.alone));
    await Promise.all(
      ids.map((id) =>
        api(attacker.owner, "DELETE", `/projects/${attacker.slug}/requests/${id}`).catch(() => {}),
      ),
    );
    await api(attacker.owner, "DELETE", `/projects/${attacker.slug}/notifications`).catch(() => {});
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
  await mkdir("bench/results", { recursive: true });
  await writeFile(
    "bench/results/isolation.json",
    `${JSON.stringify({ at: new Date().toISOString(), seconds, results }, null, 2)}\n`,
  );
});
