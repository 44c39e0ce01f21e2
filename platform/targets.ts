/**
 * Node's connection to targets, for the worker and the Node edge alike: a dispatcher that
 * connects only to addresses the rules allow, checked where it connects, and the call to a
 * target through it (the `CallTarget` that core/target-call.ts's `sendToTarget` calls).
 */
import { type LookupAddress, lookup } from "node:dns";
import type { LookupFunction } from "node:net";
import { networkInterfaces } from "node:os";
import { pipeline, type Transform } from "node:stream";
import { constants, createBrotliDecompress, createGunzip, createInflate } from "node:zlib";
import { Agent, buildConnector, type Dispatcher, request } from "undici";
import { type CallTarget, TargetRefused } from "../core/target-request.ts";
import { answersProblem, literalAddress, type TargetRules } from "../core/targets.ts";

/**
 * A dispatcher for calls to targets that connects only to addresses `rules` allow, checked
 * where it connects: the URL's literal address, or every DNS answer of its name (one refused
 * answer refuses the name), and the socket then dials those very answers. With no second
 * lookup, a name that answers differently after the check (DNS rebinding) reaches nothing
 * unchecked. The edge's own listeners are an address and a port, and a lookup knows no port:
 * the connected socket's peer is checked against them before a byte is sent on it.
 */
export function targetDispatcher(rules: TargetRules, options: Agent.Options = {}): Agent {
  const connect = buildConnector({ lookup: checkedLookup(rules) });
  return new Agent({
    ...options,
    connect(target, callback) {
      const literal = literalAddress(target.hostname);
      const problem = literal && answersProblem(target.hostname, [literal], rules);
      if (problem) return callback(refused(problem), null);
      connect(target, (...connected) => {
        const [, socket] = connected;
        const own =
          socket &&
          answersProblem(target.hostname, [socket.remoteAddress ?? ""], rules, socket.remotePort);
        if (!own) return callback(...connected);
        socket.destroy();
        callback(refused(own), null);
      });
    },
  });
}

/** Every address of this machine's interfaces: they all reach a listener on a wildcard. */
export function machineAddresses(): string[] {
  return Object.values(networkInterfaces()).flatMap((list) =>
    (list ?? []).map((entry) => entry.address),
  );
}

/** `dns.lookup` that fails, as a refused connection, when any answer is refused. */
function checkedLookup(rules: TargetRules): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (error, answers: LookupAddress[]) => {
      if (error) return callback(error, "");
      const problem = answersProblem(
        hostname,
        answers.map((answer) => answer.address),
        rules,
      );
      if (problem) return callback(refused(problem), "");
      if (options.all) return callback(null, answers);
      const [first] = answers as [LookupAddress];
      callback(null, first.address, first.family);
    });
  };
}

function refused(problem: string): NodeJS.ErrnoException {
  return Object.assign(new Error(problem), { code: REFUSED });
}

const REFUSED = "ERR_TARGET_REFUSED";

/**
 * Calls targets through `dispatcher` (a `targetDispatcher`, which checks and pins addresses)
 * with undici's `request`: about 0.5 ms less per call than its fetch (on a stream's way to its
 * first byte, among others). As fetch does, it follows no redirect (undici's `request` never
 * does) and decodes the body of the codings fetch decodes; the headers stay as the target sent
 * them.
 */
export function targetCaller(dispatcher: Dispatcher): CallTarget {
  return async (url, init) => {
    const answer = await request(url, {
      method: init.method,
      headers: init.headers,
      body: init.body,
      signal: init.signal,
      dispatcher,
    }).catch((error: NodeJS.ErrnoException) => {
      throw error.code === REFUSED ? new TargetRefused(error.message) : error;
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      for (const one of [value ?? []].flat()) headers.append(name, one);
    }
    if (NULL_BODY_STATUSES.has(answer.statusCode)) {
      await answer.body.dump();
      return { status: answer.statusCode, headers, body: null };
    }
    let decoding: Transform[];
    try {
      decoding = decoders(headers.get("content-encoding"));
    } catch (error) {
      answer.body.destroy();
      throw error;
    }
    const last = decoding.at(-1);
    if (last) pipeline([answer.body, ...decoding], () => {});
    return { status: answer.statusCode, headers, body: last ?? answer.body };
  };
}

/** The statuses whose answer has no body (fetch's null body statuses, less the 1xx never seen). */
export const NULL_BODY_STATUSES = new Set([204, 205, 304]);

/** Inflated as fetch and curl do it: whatever has arrived, flushed out at once. */
const SYNC_FLUSH = { flush: constants.Z_SYNC_FLUSH, finishFlush: constants.Z_SYNC_FLUSH };
const DECODERS: Record<string, () => Transform> = {
  gzip: () => createGunzip(SYNC_FLUSH),
  "x-gzip": () => createGunzip(SYNC_FLUSH),
  deflate: () => createInflate(SYNC_FLUSH),
  br: () =>
    createBrotliDecompress({
      flush: constants.BROTLI_OPERATION_FLUSH,
      finishFlush: constants.BROTLI_OPERATION_FLUSH,
    }),
};
/** More codings than this on one answer is an attack, not an answer (fetch's bound too). */
const MAX_CODINGS = 5;

/**
 * What undoes a Content-Encoding, the last coding first; none when it names a coding fetch would
 * not decode either (the body then passes as it came, as fetch passes it).
 */
function decoders(contentEncoding: string | null): Transform[] {
  const codings = (contentEncoding ?? "")
    .toLowerCase()
    .split(",")
    .map((coding) => coding.trim())
    .filter(Boolean)
    .reverse();
  if (codings.length > MAX_CODINGS) throw new Error(`${codings.length} content codings`);
  const makers = codings.map((coding) => DECODERS[coding]);
  return makers.every((make) => make !== undefined) ? makers.map((make) => make()) : [];
}
