/**
 * Ordered requests in their lanes count among their project's waiting deliveries (issue 28: a
 * project's ordering keys and lanes are bounded): at its cap, the edges refuse its async calls
 * with 409 until its lanes empty, as they do for held and scheduled deliveries.
 */
import { createServer, type ServerResponse } from "node:http";
import { afterAll, expect, test } from "vitest";
import { connect } from "../store/db.ts";
import { eventually, projectWithEndpoint, relay, stack } from "./helpers.ts";

const sql = connect(stack().databaseUrl, { max: 2 });
/** A customer's endpoint that answers nothing until told to. */
const waiting: ServerResponse[] = [];
let answering = false;
const gate = createServer((req, res) => {
  req.resume();
  if (answering) res.end("{}");
  else waiting.push(res);
});
await new Promise<void>((resolve) => gate.listen(0, "127.0.0.1", resolve));
const { port } = gate.address() as { port: number };
afterAll(async () => {
  answering = true;
  for (const res of waiting.splice(0)) res.end("{}");
  await new Promise<void>((resolve) => gate.close(() => resolve()));
  await sql.end();
});

test("ordered requests in their lanes count toward the project's cap: at it, async calls are 409 until the lanes empty", async () => {
  const p = await projectWithEndpoint(
    [{ name: "gate", targetUrl: `http://127.0.0.1:${port}/in` }],
    { ordering: "fifo" },
    "free",
  );
  await sql`update projects set max_waiting_deliveries = 3 where slug = ${p.slug}`;
  const send = (key: string) =>
    relay(p.slug, "/v1/hook", { key: p.key, body: "{}", headers: { "relay-ordering-key": key } });
  // Three keys' lanes: each request is in its lane until it ends, and none can end yet.
  for (const key of ["a", "b", "c"]) expect((await send(key)).status).toBe(202);
  const refused = await eventually(async () => {
    const answer = await send("d");
    return answer.status === 409 && answer;
  });
  expect(refused.json().error.code).toBe("limit_exceeded");

  answering = true;
  for (const res of waiting.splice(0)) res.end("{}");
  await eventually(async () => (await send("e")).status === 202);
});
