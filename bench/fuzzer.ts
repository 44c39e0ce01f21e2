/**
 * Malformed calls to a running stack, for `npm run fuzz` and test/fuzz.test.ts: inbound calls
 * to the edge and management calls to the control plane (bad JSON, lying lengths, huge and
 * duplicate headers, odd paths and hosts, random keys, compressed bombs, slow bodies), each
 * written on a raw socket so nothing between here and the server fixes it first. Every answer
 * is counted by component and status class; a 500 keeps the exact request for the report.
 * This file runs the families and counts; the probes are built in bench/fuzz-edge-probes.ts and
 * bench/fuzz-control-probes.ts, from bench/fuzz-values.ts, and written by bench/fuzz-wire.ts.
 */
import { controlFamilies } from "./fuzz-control-probes.ts";
import { edgeFamilies } from "./fuzz-edge-probes.ts";
import type { Family, FuzzTarget } from "./fuzz-probes.ts";
import { type Random, random } from "./fuzz-values.ts";
import { type Component, type Probe, send, statusClass } from "./fuzz-wire.ts";

export interface FuzzFinding {
  component: Component;
  kind: string;
  status: number;
  /** The request as written (head, and the start of its body), JSON-escaped by the report. */
  request: string;
}

export interface FuzzReport {
  sent: number;
  /** component -> status class ("2xx".."5xx", "closed", "reset", "refused", "timeout") -> count. */
  byClass: Record<Component, Record<string, number>>;
  /** kind -> status class -> count. */
  byKind: Record<string, Record<string, number>>;
  /** Answers of 5xx by component and status ("edge 503"). */
  serverErrors: Record<string, number>;
  /** Every answer of 500, with its request (the first 50 in full). */
  internalErrors: FuzzFinding[];
  internalErrorCount: number;
  seconds: number;
}

/** Slow and compressed probes cost seconds or megabytes each: a few of them go a long way. */
const RARE = new Set([
  "edge slow body",
  "control slow body",
  "control compressed bomb",
  "edge compressed body",
]);

function chooseFamily(r: Random): Family {
  const all = { ...edgeFamilies, ...controlFamilies };
  for (;;) {
    const name = r.pick(Object.keys(all));
    if (!RARE.has(name) || r.next() < 0.05) return all[name] as Family;
  }
}

/** The request as written, printable: at most 600 characters of it. */
function shown(probe: Probe): string {
  const bytes = Buffer.concat(probe.parts.filter((p): p is Buffer => Buffer.isBuffer(p)));
  const text = bytes.subarray(0, 600).toString("latin1");
  return bytes.length > 600 ? `${text}... (${bytes.length} bytes)` : text;
}

/**
 * Sends `count` probes, `concurrency` at a time, stopping early at `deadline` (epoch ms) or when
 * `signal` aborts. Deterministic for a seed, up to the order answers arrive in.
 */
export async function fuzz(
  target: FuzzTarget,
  options: {
    count: number;
    concurrency: number;
    seed: number;
    deadline: number;
    signal?: AbortSignal;
  },
): Promise<FuzzReport> {
  const r = random(options.seed);
  const started = performance.now();
  const report: FuzzReport = {
    sent: 0,
    byClass: { edge: {}, control: {} },
    byKind: {},
    serverErrors: {},
    internalErrors: [],
    internalErrorCount: 0,
    seconds: 0,
  };
  const next = () => {
    if (report.sent >= options.count || Date.now() > options.deadline) return null;
    if (options.signal?.aborted) return null;
    report.sent++;
    return chooseFamily(r)(r, target);
  };
  const lane = async () => {
    for (let probe = next(); probe; probe = next()) {
      const port = probe.component === "edge" ? target.edgePort : target.controlPort;
      const answer = await send(port, probe);
      const cls = statusClass(answer);
      const counts = report.byClass[probe.component];
      counts[cls] = (counts[cls] ?? 0) + 1;
      const kind = report.byKind[probe.kind] ?? {};
      kind[cls] = (kind[cls] ?? 0) + 1;
      report.byKind[probe.kind] = kind;
      if (typeof answer === "number" && answer >= 500) {
        const key = `${probe.component} ${answer}`;
        report.serverErrors[key] = (report.serverErrors[key] ?? 0) + 1;
      }
      if (answer === 500) {
        report.internalErrorCount++;
        if (report.internalErrors.length < 50) {
          report.internalErrors.push({
            component: probe.component,
            kind: probe.kind,
            status: answer,
            request: shown(probe),
          });
        }
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, lane));
  report.seconds = (performance.now() - started) / 1000;
  return report;
}

/** Sets up the project every probe aims at, through the REST API. */
export async function fuzzProject(
  controlUrl: string,
  adminToken: string,
  targetUrl: string,
): Promise<FuzzTarget["project"]> {
  const call = async (token: string, method: string, path: string, body: unknown) => {
    const response = await fetch(`${controlUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`${method} ${path}: ${JSON.stringify(answer)}`);
    return answer;
  };
  const slug = `fuzz${Date.now().toString(36)}`;
  const created = await call(adminToken, "POST", "/projects", { slug, name: slug, plan: "paid" });
  const ownerToken = created.ownerToken as string;
  const base = `/projects/${slug}`;
  await call(ownerToken, "POST", `${base}/lines`, { key: "v1" });
  await call(ownerToken, "POST", `${base}/lines/v1/endpoints`, {
    path: "hook",
    targets: [{ name: "sink", targetUrl }],
  });
  await call(ownerToken, "POST", `${base}/lines/v1/endpoints`, {
    path: "strict",
    targets: [{ name: "sink", targetUrl }],
    schema: {
      type: "object",
      required: ["n"],
      properties: { n: { type: "integer" }, s: { type: "string", maxLength: 100 } },
    },
  });
  const minted = await call(ownerToken, "POST", `${base}/keys`, { name: "fuzz", mode: "live" });
  return { slug, ownerToken, key: minted.plaintext as string };
}
