/** Node's fetch on a keep-alive pool of its own (undici), for the edge's and the control plane's calls out. */
import { readFileSync } from "node:fs";
import { rootCertificates } from "node:tls";
import { Agent, fetch as undiciFetch } from "undici";

/**
 * A fetch on a keep-alive pool of its own: at most `connections` to a host, no cap when unset;
 * trusting the CA in `caFile` as well as the system's roots when given.
 */
export function pooledFetch(connections?: number, caFile?: string): typeof fetch {
  const dispatcher = new Agent({
    keepAliveTimeout: 30_000,
    connections: connections ?? null,
    ...(caFile && { connect: { ca: [...rootCertificates, readFileSync(caFile, "utf8")] } }),
  });
  return ((input: string | URL | Request, init?: RequestInit) =>
    undiciFetch(input as string, { ...(init as object), dispatcher })) as unknown as typeof fetch;
}
