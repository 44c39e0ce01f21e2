/**
 * No plaintext secret reaches a log line or a Postgres row. A full scenario handles every kind
 * (member tokens, live and test keys, a rotated key, an auto-rotated successor revealed once, a
 * wrong key, the admin and edge tokens, endpoint signing secrets new and rotated), then the whole
 * stack log and every row of every table are searched for each. (Debian's pg_dump 15 refuses the
 * embedded PostgreSQL 18, so the rows are read with SQL: the same data a dump holds.)
 */
import { randomBytes } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createServer } from "node:http";
import postgres from "postgres";
import { afterAll, expect, test } from "vitest";
import { api, finishedLog, mintKey, newProject, relay, stack, targetServer } from "./helpers.ts";

const sink = await targetServer();
const streaming = createServer((_, res) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.end("data: hi\n\n");
});
await new Promise<void>((resolve) => streaming.listen(0, "127.0.0.1", resolve));
afterAll(async () => {
  await sink.close();
  await new Promise((resolve) => streaming.close(resolve));
});

/** Every plaintext the scenario handled, by what it is. */
async function fullScenario(): Promise<Record<string, string>> {
  const seen: Record<string, string> = {
    adminToken: stack().adminToken,
    edgeToken: stack().edgeToken,
    operatorToken: stack().operatorToken,
  };
  // The operator's one use: a codec session (the cookie carries no token).
  const session = await fetch(`${stack().controlUrl}/codec/session`, {
    method: "POST",
    headers: { authorization: `Bearer ${stack().operatorToken}` },
  });
  if (session.status !== 200) throw new Error(`codec session: ${session.status}`);
  const p = await newProject("paid");
  seen.ownerToken = p.ownerToken;
  const base = `/projects/${p.slug}`;
  const editor = await api<{ token: string }>(p.ownerToken, "POST", `${base}/members`, {
    name: "ed",
    role: "editor",
  });
  seen.editorToken = editor.body.token;
  await api(p.ownerToken, "POST", `${base}/lines`, { key: "v1" });
  const streamUrl = `http://127.0.0.1:${(streaming.address() as { port: number }).port}/s`;
  for (const [path, targets] of [
    ["async", [{ name: "a", targetUrl: sink.url }]],
    ["sync", [{ name: "s", targetUrl: sink.url, deliveryMode: "sync" }]],
    ["stream", [{ name: "t", targetUrl: streamUrl, deliveryMode: "stream" }]],
  ] as const) {
    const created = await api<{ signingSecret: string }>(
      seen.editorToken,
      "POST",
      `${base}/lines/v1/endpoints`,
      { path, targets },
    );
    expect(created.status).toBe(201);
    seen[`signingSecret.${path}`] = created.body.signingSecret;
  }
  const ctx = { base, ownerToken: p.ownerToken };
  seen.liveKey = await mintKey(ctx, "live");
  seen.testKey = await mintKey(ctx, "test");
  const [live] = (await api<{ keys: { id: string }[] }>(p.ownerToken, "GET", `${base}/keys`)).body
    .keys;
  const rotated = await api<{ plaintext: string }>(
    p.ownerToken,
    "POST",
    `${base}/keys/${live?.id}/rotate`,
  );
  seen.rotatedKey = rotated.body.plaintext;
  const expiring = await api<{ key: { id: string } }>(p.ownerToken, "POST", `${base}/keys`, {
    name: "soon",
    mode: "live",
    ttlDays: 2,
  });
  expect((await api(stack().adminToken, "POST", "/admin/rotation/run")).status).toBe(200);
  const revealed = await api<{ plaintext: string }>(
    p.ownerToken,
    "POST",
    `${base}/keys/${expiring.body.key.id}/reveal-successor`,
  );
  expect(revealed.status).toBe(200);
  seen.revealedSuccessor = revealed.body.plaintext;
  const rotatedSecret = await api<{ signingSecret: string }>(
    seen.editorToken,
    "POST",
    `${base}/lines/v1/endpoints/async/signing-secret/rotate`,
    {},
  );
  expect(rotatedSecret.status).toBe(201);
  seen.rotatedSigningSecret = rotatedSecret.body.signingSecret;
  // Random, as a real key is: a run of one letter may stand in another test's rows (a padded schema).
  seen.wrongKey = `rk_live_${randomBytes(32).toString("base64url")}`;

  for (const key of [seen.liveKey, seen.testKey, seen.rotatedKey, seen.revealedSuccessor]) {
    const queued = await relay(p.slug, "/v1/async", { key, body: '{"n":1}' });
    await finishedLog(ctx, queued.json().requestId);
    expect((await relay(p.slug, "/v1/sync", { key, body: "{}" })).status).toBe(200);
    expect((await relay(p.slug, "/v1/stream", { key, body: "{}" })).status).toBe(200);
  }
  expect((await relay(p.slug, "/v1/async", { key: seen.wrongKey, body: "{}" })).status).toBe(401);
  return seen;
}

test("no plaintext key, member token or other secret is in any log line or Postgres row", async () => {
  const secrets = await fullScenario();
  // Targets did get the calls, so the log holds the scenario (but not their Authorization).
  expect(sink.received.length).toBeGreaterThanOrEqual(8);
  expect(sink.received.every((r) => r.headers.authorization === undefined)).toBe(true);

  const log = await readFile(stack().logFile, "utf8");
  expect(log).toContain('"msg":"answered"');
  const sql = postgres(stack().databaseUrl, { max: 1 });
  try {
    const tables = await sql<{ name: string }[]>`
      select table_name as name from information_schema.tables where table_schema = 'public'`;
    let rows = "";
    for (const { name } of tables) {
      const all = await sql`select row_to_json(t)::text as row from ${sql(name)} t`;
      rows += all.map((r) => r.row).join("\n");
    }
    expect(tables.map((t) => t.name)).toEqual(expect.arrayContaining(["api_keys", "members"]));
    for (const [what, plaintext] of Object.entries(secrets)) {
      // The random part: a prefix alone (rk_live_) is no secret.
      const secretPart = plaintext.slice(-32);
      expect(log.includes(secretPart), `${what} in the log`).toBe(false);
      expect(rows.includes(secretPart), `${what} in Postgres`).toBe(false);
    }
  } finally {
    await sql.end();
  }
});
