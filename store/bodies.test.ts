import { afterAll, expect, test } from "vitest";
import { newId } from "../core/secrets.ts";
import { stack } from "../test/helpers.ts";
import { insertBodies, insertBody, loadBody } from "./bodies.ts";
import { connect } from "./db.ts";

const sql = connect(stack().databaseUrl, { max: 2 });
const project = `bodies-${newId("p")}`;
await sql`insert into projects (id, slug, name, plan) values (${project}, ${project}, 'bodies', 'paid')`;
afterAll(async () => {
  await sql`delete from projects where id = ${project}`;
  await sql.end();
});

/** Every byte value, over and over: no text encoding may pass for it. */
const bytesOf = (length: number, seed: number) =>
  Uint8Array.from({ length }, (_, i) => (i * 7 + seed) % 256);

test("a stored body reads back byte for byte, at the edges' default cap (5 MiB)", async () => {
  const body = bytesOf(5 * 1024 * 1024, 1);
  const ref = await insertBody(sql, project, newId("req"), body);
  expect(ref).not.toBeNull();
  // Compared whole, not element by element: a 5 MiB diff would take the test's time.
  expect(Buffer.compare(await loadBody(sql, ref as string), body)).toBe(0);
});

test("a body stored again replaces the first; a view into a larger buffer stores only its bytes", async () => {
  const requestId = newId("req");
  await insertBody(sql, project, requestId, bytesOf(40_000, 2));
  const larger = bytesOf(50_000, 3);
  const view = larger.subarray(1000, 34_000);
  await sql.begin((tx) => insertBodies(tx, project, [{ requestId, body: view }]));
  expect(await loadBody(sql, requestId)).toEqual(Uint8Array.from(view));
});

test("a large body is stored without pglz (lz4 where Postgres has it, else as it is): pglz cost most of its Postgres CPU", async () => {
  const requestId = newId("req");
  const json = JSON.stringify({ events: Array.from({ length: 4000 }, (_, i) => ({ id: i })) });
  await insertBody(sql, project, requestId, new TextEncoder().encode(json));
  const [stored] = await sql<{ compression: string | null }[]>`
    select pg_column_compression(body) as compression from bodies where request_id = ${requestId}`;
  expect(stored?.compression ?? "none").not.toBe("pglz");
});

test("an empty body and an unknown project", async () => {
  const requestId = newId("req");
  await insertBody(sql, project, requestId, new Uint8Array());
  expect(await loadBody(sql, requestId)).toEqual(new Uint8Array());
  expect(await insertBody(sql, `none-${project}`, newId("req"), bytesOf(10, 4))).toBeNull();
});
