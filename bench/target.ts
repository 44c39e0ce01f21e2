/**
 * The customer's side for the benchmark, in a process of its own: /sync answers at once,
 * /stream sends `BENCH_CHUNKS` SSE events `BENCH_CHUNK_MS` apart, each carrying the wall-clock
 * time it was written, /sink takes async deliveries. GET /receipts streams the request id of
 * every delivery to /sink from then on, one per line, so a bench can time 202 to receipt; a
 * delivery to /sink/{name} is streamed as "{request id} {name} {X-Bench-Seq}" (bench/shapes.ts
 * tells targets and ordered calls apart by them), and /sink/flaky answers 503 to every fourth
 * request's first delivery, 200 to its retry. GET /receipts/count answers how many deliveries
 * and distinct requests /sink has had.
 */
import { createServer, type ServerResponse } from "node:http";

const port = Number(process.env.BENCH_TARGET_PORT);
const chunks = Number(process.env.BENCH_CHUNKS ?? 10);
const chunkMs = Number(process.env.BENCH_CHUNK_MS ?? 20);
const wallClock = () => performance.timeOrigin + performance.now();

const watchers = new Set<ServerResponse>();
const delivered = new Set<string>();
let deliveries = 0;
/** /sink/flaky's requests seen, and how many: every fourth one's first delivery fails. */
const flakySeen = new Set<string>();

createServer((req, res) => {
  if (req.method === "GET" && req.url === "/receipts") {
    res.writeHead(200, { "content-type": "text/plain" });
    res.flushHeaders();
    watchers.add(res);
    res.on("close", () => watchers.delete(res));
    return;
  }
  if (req.method === "GET" && req.url === "/receipts/count") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ deliveries, distinct: delivered.size }));
    return;
  }
  req.resume();
  req.on("end", () => {
    if (req.url?.startsWith("/stream")) {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      let sent = 0;
      const tick = () => {
        res.write(`data: ${wallClock()}\n\n`);
        if (++sent < chunks) setTimeout(tick, chunkMs);
        else res.end();
      };
      tick();
      return;
    }
    if (req.url?.startsWith("/sink")) {
      const requestId = String(req.headers["x-relay-request-id"]);
      const name = req.url.slice("/sink/".length);
      if (name === "flaky" && !flakySeen.has(requestId)) {
        flakySeen.add(requestId);
        if (flakySeen.size % 4 === 0) {
          res.writeHead(503).end();
          return;
        }
      }
      deliveries++;
      delivered.add(requestId);
      const receipt = name ? `${requestId} ${name} ${req.headers["x-bench-seq"] ?? ""}` : requestId;
      for (const watcher of watchers) watcher.write(`${receipt}\n`);
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"ok":true}');
  });
}).listen(port, "127.0.0.1", () => {
  console.log(JSON.stringify({ msg: "bench target listening", port }));
});
