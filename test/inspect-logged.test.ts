/**
 * What the worker keeps of each request and answer in the log (issue 28, inspectable requests),
 * read back through the API: the inbound headers (never Authorization), the body (inline, or by
 * reference when large), the Idempotency-Key, and each attempt's answer (its headers and first
 * 64 KiB, truncated past that). The log's write path fills these columns
 * (store/migrations/016_inspectable.sql).
 */
import { createServer } from "node:http";
import { afterAll, expect, test } from "vitest";
import { api, finishedLog, projectWithEndpoint, relay } from "./helpers.ts";

type Body = { encoding: string; text: string; bytes: number };
type Logged = {
  status: string;
  idempotencyKey: string | null;
  headers: Record<string, string> | null;
  body: Body | null;
  attempts: {
    statusCode: number | null;
    response: { headers: Record<string, string>; body: Body; truncated: boolean } | null;
  }[];
};

/** A target answering `size` bytes of "a" with a header of its own. */
const answering = await (async () => {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      const size = Number(new URL(req.url ?? "/", "http://t").searchParams.get("size") ?? 2);
      res.writeHead(200, { "content-type": "text/plain", "x-answer": "yes" });
      res.end("a".repeat(size));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
})();
afterAll(() => answering.close());

test("the log keeps the request as received and each answer, within their caps", async () => {
  const p = await projectWithEndpoint([
    { name: "short", targetUrl: `${answering.url}/in?size=2` },
    { name: "long", targetUrl: `${answering.url}/in?size=70000` },
  ]);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: '{"order":7}',
      headers: { "x-order": "7", "idempotency-key": "order-7" },
    })
  ).json();
  const log = await finishedLog<Logged>(p, requestId);
  expect(log.status).toBe("delivered");
  expect(log.idempotencyKey).toBe("order-7");
  expect(log.headers).toMatchObject({ "content-type": "application/json", "x-order": "7" });
  expect(Object.keys(log.headers ?? {})).not.toContain("authorization");
  expect(log.body).toEqual({ encoding: "utf8", text: '{"order":7}', bytes: 11 });
  const answers = log.attempts.map((a) => a.response);
  expect(answers).toHaveLength(2);
  for (const answer of answers) expect(answer?.headers["x-answer"]).toBe("yes");
  const [short, long] = [...answers].sort((a, b) => (a?.body.bytes ?? 0) - (b?.body.bytes ?? 0));
  expect(short).toMatchObject({
    body: { encoding: "utf8", text: "aa", bytes: 2 },
    truncated: false,
  });
  expect(long).toMatchObject({ body: { bytes: 64 * 1024 }, truncated: true });

  const found = await api<{ requests: { requestId: string }[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/requests?idempotencyKey=order-7`,
  );
  expect(found.body.requests.map((r) => r.requestId)).toEqual([requestId]);
});

test("a large body, stored by reference, reads back whole", async () => {
  const p = await projectWithEndpoint([{ name: "t", targetUrl: `${answering.url}/in` }]);
  const large = JSON.stringify({ pad: "x".repeat(300 * 1024) });
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: large })).json();
  const log = await finishedLog<Logged>(p, requestId);
  expect(log.body).toEqual({ encoding: "utf8", text: large, bytes: large.length });
});
