/**
 * The edge on Deno: `deno run --allow-net --allow-env --allow-read --allow-sys=hostname edge/main.deno.ts`.
 * Deno's own fetch and Web Crypto; Deno.serve aborts a request's signal when its caller leaves.
 */
import type { ConnInfo, EdgeHandler } from "./app.ts";
import { bootEdge } from "./boot.ts";

/** The slice of Deno's API this file uses, so the project type-checks without Deno's types. */
declare const Deno: {
  env: { toObject(): Record<string, string> };
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

const { config, handler, state, log } = await bootEdge(Deno.env.toObject(), { fetch, resolveHost });
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
