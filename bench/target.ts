/**
 * The customer's side for the benchmark, in a process of its own: /sync answers at once,
 * /stream sends `BENCH_CHUNKS` SSE events `BENCH_CHUNK_MS` apart, each carrying the wall-clock
 * time it was written, /sink takes async deliveries.
 */
import { createServer } from "node:http";

const port = Number(process.env.BENCH_TARGET_PORT);
const chunks = Number(process.env.BENCH_CHUNKS ?? 10);
const chunkMs = Number(process.env.BENCH_CHUNK_MS ?? 20);
const wallClock = () => performance.timeOrigin + performance.now();

createServer((req, res) => {
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
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"ok":true}');
  });
}).listen(port, "127.0.0.1", () => {
  console.log(JSON.stringify({ msg: "bench target listening", port }));
});
