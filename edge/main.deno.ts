/**
 * The edge on Deno: `deno run --allow-net --allow-env --allow-read --allow-sys=hostname edge/main.deno.ts`.
 * Deno's own fetch and Web Crypto; Deno.serve aborts a request's signal when its caller leaves.
 */
import { RelayError } from "../core/errors.ts";
import { type CallTarget, TargetRefused } from "../core/target-request.ts";
import {
  answersProblem,
  deliveryAddressProblem,
  literalAddress,
  type TargetRules,
} from "../core/targets.ts";
import { sandboxThreads, TransformPool } from "../core/transform-pool.ts";
import { webWorkerThread } from "./adapters/web-worker.ts";
import { type EdgeHandler, errorAnswer, NOT_A_PATH } from "./app.ts";
import { bootEdge } from "./boot.ts";
import type { ConnInfo } from "./pipeline.ts";

interface Conn {
  readable: ReadableStream<Uint8Array>;
  writable: WritableStream<Uint8Array>;
  close(): void;
}

/** The slice of Deno's API this file uses, so the project type-checks without Deno's types. */
declare const Deno: {
  env: { toObject(): Record<string, string> };
  createHttpClient(options: {
    proxy: { transport: "tcp"; hostname: string; port: number } | { url: string };
  }): unknown;
  listen(options: { hostname: string; port: number }): AsyncIterable<Conn> & {
    addr: { port: number };
  };
  connect(options: { hostname: string; port: number }): Promise<Conn>;
  resolveDns(name: string, type: "A" | "AAAA"): Promise<string[]>;
  serve(
    options: { port: number; hostname: string; onListen?: () => void },
    handler: (request: Request, info: { remoteAddr: { hostname: string } }) => Promise<Response>,
  ): { shutdown(): Promise<void> };
  addSignalListener(signal: "SIGTERM" | "SIGINT", handler: () => void): void;
  exit(code: number): never;
};

/** Every A and AAAA answer; a name with neither resolves to nothing. */
async function resolveHost(hostname: string): Promise<string[]> {
  const answers = await Promise.all(
    (["A", "AAAA"] as const).map((type) => Deno.resolveDns(hostname, type).catch(() => [])),
  );
  return answers.flat();
}

/**
 * Reaches targets only at checked addresses. Deno's fetch has no hook into its connections, so
 * they all go through a gate in this process: a `tcp` transport hands it plain requests and an
 * https target is a CONNECT tunnel through it. The gate reads which host a connection is for,
 * resolves it, refuses it when any answer is refused, and dials the checked answer itself; TLS
 * still runs end to end with the target's name. A dev stack that allows every address keeps
 * Deno's own resolution (and its hosts file).
 */
function targetFetch(rules: TargetRules): typeof fetch {
  if (rules.allowPrivate) return fetch;
  const gate = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  void (async () => {
    for await (const conn of gate) {
      // A refused or unreachable target: the connection closes and the fetch fails unreachable.
      passThrough(conn, rules).catch(() => closeQuietly(conn));
    }
  })();
  const { port } = gate.addr;
  const plain = Deno.createHttpClient({ proxy: { transport: "tcp", hostname: "127.0.0.1", port } });
  const tunnelled = Deno.createHttpClient({ proxy: { url: `http://127.0.0.1:${port}` } });
  return (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    const client = url.protocol === "https:" ? tunnelled : plain;
    return fetch(input, { ...init, client } as RequestInit);
  };
}

const HEAD_END = new Uint8Array([13, 10, 13, 10]);
const MAX_HEAD_BYTES = 64 * 1024;

/** One connection through the gate: its head names the target, the rest passes through. */
async function passThrough(conn: Conn, rules: TargetRules): Promise<void> {
  const reader = conn.readable.getReader();
  let buffered = new Uint8Array(0);
  let headEnd = -1;
  while (headEnd < 0) {
    const { done, value } = await reader.read();
    if (done || buffered.length > MAX_HEAD_BYTES) throw new Error("no request head");
    const joined = new Uint8Array(buffered.length + value.length);
    joined.set(buffered);
    joined.set(value, buffered.length);
    buffered = joined;
    headEnd = indexOf(buffered, HEAD_END);
  }
  const head = new TextDecoder().decode(buffered.subarray(0, headEnd));
  const tunnel = /^CONNECT (\S+) HTTP\/1\.[01]\r\n/i.exec(head);
  const authority = tunnel?.[1] ?? /\r\nhost: *([^\r\n]+)/i.exec(head)?.[1];
  const url = new URL(`${tunnel ? "https" : "http"}://${authority}`);
  const port = Number(url.port || (tunnel ? 443 : 80));
  const literal = literalAddress(url.hostname);
  const addresses = literal ? [literal] : await resolveHost(url.hostname);
  const [address] = addresses;
  if (!address || answersProblem(url.hostname, addresses, rules, port)) throw new Error("refused");
  const upstream = await Deno.connect({ hostname: address, port });
  const toUpstream = upstream.writable.getWriter();
  try {
    if (tunnel) {
      const toCaller = conn.writable.getWriter();
      await toCaller.write(new TextEncoder().encode("HTTP/1.1 200 Connection Established\r\n\r\n"));
      toCaller.releaseLock();
      await toUpstream.write(buffered.subarray(headEnd + HEAD_END.length));
    } else {
      await toUpstream.write(buffered);
    }
  } catch (error) {
    closeQuietly(upstream);
    throw error;
  }
  toUpstream.releaseLock();
  reader.releaseLock();
  await Promise.all([
    conn.readable.pipeTo(upstream.writable),
    upstream.readable.pipeTo(conn.writable),
  ]).catch(() => {});
}

/** Closes a connection that may already be closed. */
function closeQuietly(conn: Conn): void {
  try {
    conn.close();
  } catch {
    // already closed
  }
}

function indexOf(bytes: Uint8Array, pattern: Uint8Array): number {
  search: for (let at = 0; at + pattern.length <= bytes.length; at++) {
    for (let i = 0; i < pattern.length; i++) if (bytes[at + i] !== pattern[i]) continue search;
    return at;
  }
  return -1;
}

/**
 * Stream calls with Deno's fetch, through the gate. The gate refuses a connection without saying
 * why, so the address is checked here first too, for the request log's reason.
 */
function callTarget(rules: TargetRules): CallTarget {
  const gated = targetFetch(rules);
  return async (url, init) => {
    const problem = await deliveryAddressProblem(url, rules, resolveHost);
    if (problem) throw new TargetRefused(problem);
    return gated(url, init);
  };
}

/** Sandbox threads as Web Workers. */
const transforms = new TransformPool(
  () => webWorkerThread(new URL("./adapters/sandbox-thread.deno.ts", import.meta.url)),
  sandboxThreads(navigator.hardwareConcurrency),
);

const { config, handler, state, log, finish } = await bootEdge(Deno.env.toObject(), {
  fetch,
  callTarget,
  transform: transforms.run,
});
const serve: EdgeHandler = handler;
/**
 * Deno builds an origin-form request's URL from the Host header as sent, and an absolute-form
 * one's from its target, which would name another host than the Host the handler routes by.
 * The Node adapter refuses every target but a path; so does this (Deno refuses `*` itself).
 */
function absoluteForm(request: Request): boolean {
  const host = request.headers.get("host");
  return host !== null && !request.url.startsWith(`http://${host}/`);
}

const server = Deno.serve(
  {
    port: config.RELAY_EDGE_PORT,
    hostname: config.RELAY_EDGE_HOST,
    onListen: () => {
      const url = `http://${config.RELAY_EDGE_HOST}:${config.RELAY_EDGE_PORT}`;
      log.info({ runtime: "deno", url }, "edge listening");
    },
  },
  (request, info) =>
    absoluteForm(request)
      ? Promise.resolve(errorAnswer(new RelayError("bad_request", NOT_A_PATH)))
      : serve(request, { remoteAddress: info.remoteAddr.hostname } satisfies ConnInfo),
);
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.addSignalListener(signal, () => {
    const released = state.stop();
    void server
      .shutdown()
      .then(() => released)
      .then(finish)
      .finally(() => Deno.exit(0));
  });
}
