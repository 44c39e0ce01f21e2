/**
 * The edge on Deno: `deno run --allow-net --allow-env --allow-read --allow-sys=hostname edge/main.deno.ts`.
 * Deno's own fetch and Web Crypto; Deno.serve aborts a request's signal when its caller leaves.
 */
import { answersProblem, literalAddress, type TargetRules } from "../core/targets.ts";
import type { ConnInfo, EdgeHandler } from "./app.ts";
import { bootEdge } from "./boot.ts";

interface HttpClient {
  close(): void;
}

/** The slice of Deno's API this file uses, so the project type-checks without Deno's types. */
declare const Deno: {
  env: { toObject(): Record<string, string> };
  createHttpClient(options: {
    proxy: { transport: "tcp"; hostname: string; port: number };
  }): HttpClient;
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

/** Bounds the clients kept per checked address (each holds its keep-alive connections). */
const MAX_PINNED_CLIENTS = 1024;

/**
 * Reaches targets only at checked addresses: resolves the URL's name, refuses it when any answer
 * is refused, and connects to the first answer through a client pinned to it (a `tcp` transport),
 * so Deno makes no lookup of its own that could answer differently. TLS still names the URL's
 * host. A dev stack that allows every address keeps Deno's own resolution (and its hosts file).
 */
function targetFetch(rules: TargetRules): typeof fetch {
  if (rules.allowPrivate) return fetch;
  const clients = new Map<string, HttpClient>();
  const pinnedTo = (hostname: string, port: number): HttpClient => {
    const key = `${hostname} ${port}`;
    let client = clients.get(key);
    if (!client) {
      if (clients.size >= MAX_PINNED_CLIENTS) {
        const [oldest] = clients;
        oldest?.[1].close();
        if (oldest) clients.delete(oldest[0]);
      }
      client = Deno.createHttpClient({ proxy: { transport: "tcp", hostname, port } });
      clients.set(key, client);
    }
    return client;
  };
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input);
    const literal = literalAddress(url.hostname);
    const addresses = literal ? [literal] : await resolveHost(url.hostname);
    const problem = answersProblem(url.hostname, addresses, rules);
    if (problem) throw new TypeError(problem);
    const [address] = addresses;
    if (!address) throw new TypeError(`target ${url.hostname} does not resolve`);
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    return fetch(input, { ...init, client: pinnedTo(address, port) } as RequestInit);
  };
}

const { config, handler, state, log } = await bootEdge(Deno.env.toObject(), {
  fetch,
  resolveHost,
  targetFetch,
});
const serve: EdgeHandler = handler;
const server = Deno.serve(
  {
    port: config.RELAY_EDGE_PORT,
    hostname: config.RELAY_EDGE_HOST,
    onListen: () => {
      const url = `http://${config.RELAY_EDGE_HOST}:${config.RELAY_EDGE_PORT}`;
      log.info({ runtime: "deno", url }, "edge listening");
    },
  },
  (request, info) => serve(request, { remoteAddress: info.remoteAddr.hostname } satisfies ConnInfo),
);
for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.addSignalListener(signal, () => {
    state.stop();
    void server.shutdown().then(() => Deno.exit(0));
  });
}
