/** Node's fetch on a keep-alive pool of its own (undici), for the edge's and the control plane's calls out. */
import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import { Agent, request, fetch as undiciFetch } from "undici";
import { NULL_BODY_STATUSES } from "./targets.ts";

/**
 * A fetch on a keep-alive pool of its own: at most `connections` to a host, no cap when unset;
 * trusting the CA in `caFile` as well as the system's roots when given. Its answers stream (the
 * control plane's change stream).
 */
export function pooledFetch(connections?: number, caFile?: string): typeof fetch {
  const dispatcher = poolOf(connections, caFile);
  return ((input: string | URL | Request, init?: RequestInit) =>
    undiciFetch(input as string, { ...(init as object), dispatcher })) as unknown as typeof fetch;
}

/**
 * The same, for Temporal's HTTP API, whose answers are small JSON read whole: the call goes
 * through undici's `request` and its answer becomes a Response once read, without fetch's web
 * streams around both bodies, which cost most of a call's CPU (docs/benchmarks.md). It follows
 * no redirect (Temporal sends none) and takes a string or bytes as the body.
 */
export function pooledWholeFetch(connections?: number, caFile?: string): typeof fetch {
  const dispatcher = poolOf(connections, caFile);
  return (async (input: string | URL, init: RequestInit = {}) => {
    const answer = await request(input, {
      method: (init.method ?? "GET") as "GET",
      headers: Object.fromEntries(new Headers(init.headers)),
      body: init.body as string | Uint8Array | null | undefined,
      signal: init.signal ?? undefined,
      dispatcher,
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      for (const one of [value ?? []].flat()) headers.append(name, one);
    }
    const body = await answer.body.arrayBuffer();
    return new Response(NULL_BODY_STATUSES.has(answer.statusCode) ? null : body, {
      status: answer.statusCode,
      headers,
    });
  }) as typeof fetch;
}

function poolOf(connections: number | undefined, caFile: string | undefined): Agent {
  return new Agent({
    keepAliveTimeout: 30_000,
    connections: connections ?? null,
    ...(caFile && { connect: { ca: [...rootCertificates, readFileSync(caFile, "utf8")] } }),
  });
}
