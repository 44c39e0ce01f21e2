/**
 * A bare Node proxy in front of bench/relay.ts's target: issue 27's yardstick for a stream's
 * added time to first byte (the edge's within 1.5 ms; a bare Node proxy adds about 1). node:http
 * in, undici's `request` out on a kept-alive pool, the answer piped back as it comes: no checks,
 * no signing, no log, only what any proxy on Node pays on this machine. A process of its own, as
 * the edge is, on BENCH_PROXY_PORT, to BENCH_PROXY_TARGET.
 */
import { createServer } from "node:http";
import { pipeline } from "node:stream";
import { Agent, request } from "undici";

const port = Number(process.env.BENCH_PROXY_PORT);
const target = process.env.BENCH_PROXY_TARGET;
if (!port || !target) throw new Error("BENCH_PROXY_PORT and BENCH_PROXY_TARGET");
const dispatcher = new Agent({ keepAliveTimeout: 60_000 });

createServer((req, res) => {
  const { host: _, connection: __, ...headers } = req.headers;
  request(`${target}${req.url}`, {
    method: req.method as "POST",
    headers,
    body: req.method === "GET" || req.method === "HEAD" ? null : req,
    dispatcher,
  }).then(
    (upstream) => {
      res.writeHead(upstream.statusCode, upstream.headers as Record<string, string>);
      pipeline(upstream.body, res, () => {});
    },
    () => res.writeHead(502).end(),
  );
}).listen(port, "127.0.0.1", () => {
  console.log(JSON.stringify({ msg: "node proxy listening", port }));
});
