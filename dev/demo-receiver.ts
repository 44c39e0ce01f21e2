/**
 * The demo target `npm start` seeds: a customer's endpoint stand-in that logs what it receives
 * and answers 200.
 */
import { createServer } from "node:http";

const port = Number(process.env.RELAY_DEMO_PORT ?? 8789);

createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    console.log(
      JSON.stringify({
        msg: "delivery received",
        path: req.url,
        requestId: req.headers["x-relay-request-id"],
        deliveryId: req.headers["x-relay-delivery-id"],
        attempt: req.headers["x-relay-attempt"],
        body: Buffer.concat(chunks).toString("utf8").slice(0, 500),
      }),
    );
    res.writeHead(200, { "content-type": "application/json" });
    res.end('{"received":true}');
  });
}).listen(port, "127.0.0.1", () => {
  console.log(JSON.stringify({ msg: "demo receiver listening", url: `http://127.0.0.1:${port}` }));
});
