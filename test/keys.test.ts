import { Client, Connection } from "@temporalio/client";
import postgres from "postgres";
import { afterAll, describe, expect, test } from "vitest";
import { api, newProject, projectWithEndpoint, relay, stack, targetServer } from "./helpers.ts";

const DAY = 86_400;
const sink = await targetServer();
afterAll(() => sink.close());

type Key = {
  id: string;
  status: string;
  expiresAt: string | null;
  predecessorId: string | null;
  successorId: string | null;
};
type Issued = { key: Key; plaintext: string };

const admin = (path: string, body: unknown = {}) => api(stack().adminToken, "POST", path, body);
/** Moves the shared dev clock; answers once every edge runs on the new time. */
const advanceClock = (seconds: number) => admin("/admin/clock", { advanceSeconds: seconds });
const runRotation = async () => (await admin("/admin/rotation/run")).body.rotated as number;

async function setup() {
  const project = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const keys = `${project.base}/keys`;
  const mint = async (body: Record<string, unknown>) => {
    const answer = await api<Issued>(project.ownerToken, "POST", keys, {
      name: "k",
      mode: "live",
      ...body,
    });
    expect(answer.status, answer.text).toBe(201);
    return answer.body;
  };
  const call = (key: string) => relay(project.slug, "/v1/hook", { key, body: "{}" });
  return { ...project, keys, mint, call };
}

describe("the spec's key state table", () => {
  test("active: accepted with no key headers", async () => {
    const p = await setup();
    const { plaintext } = await p.mint({ ttlDays: 30 });
    const answer = await p.call(plaintext);
    expect(answer.status).toBe(202);
    expect(answer.headers["x-relay-key-status"]).toBeUndefined();
  });

  test("expiresAt reached: accepted for 24 h with expired_grace, then 401 key_expired", async () => {
    const p = await setup();
    const { plaintext } = await p.mint({ ttlDays: 1 });
    await advanceClock(DAY);
    const grace = await p.call(plaintext);
    expect(grace.status).toBe(202);
    expect(grace.headers["x-relay-key-status"]).toBe("expired_grace");
    expect(grace.headers["x-relay-key-successor-available"]).toBeUndefined();
    const listed = await api<{ keys: Key[] }>(p.ownerToken, "GET", p.keys);
    expect(listed.body.keys[0]?.status).toBe("expired_grace");

    await advanceClock(DAY);
    const expired = await p.call(plaintext);
    expect(expired.status).toBe(401);
    expect(expired.json().error.code).toBe("key_expired");
  });

  test("revoke, from active or grace: 401 key_revoked at once, on the edge's warm cache too", async () => {
    const p = await setup();
    const active = await p.mint({ ttlDays: 2 });
    const graced = await p.mint({ ttlDays: 1 });
    expect((await p.call(active.plaintext)).status).toBe(202);
    await advanceClock(DAY);
    expect((await p.call(graced.plaintext)).headers["x-relay-key-status"]).toBe("expired_grace");

    for (const key of [active, graced]) {
      const revoked = await api<{ key: Key }>(p.ownerToken, "DELETE", `${p.keys}/${key.key.id}`);
      expect(revoked.status).toBe(200);
      expect(revoked.body.key.status).toBe("revoked");
      const refused = await p.call(key.plaintext);
      expect(refused.status).toBe(401);
      expect(refused.json().error.code).toBe("key_revoked");
    }
    // Revoking again changes nothing; an expired key has nothing left to revoke.
    expect((await api(p.ownerToken, "DELETE", `${p.keys}/${active.key.id}`)).status).toBe(200);
    const old = await p.mint({ ttlDays: 1 });
    await advanceClock(2 * DAY);
    const late = await api(p.ownerToken, "DELETE", `${p.keys}/${old.key.id}`);
    expect(late.status).toBe(409);
    expect(late.body.error).toMatchObject({ code: "key_not_active" });
  });

  test("manual rotate: a linked successor, plaintext once; the predecessor stays valid until it expires", async () => {
    const p = await setup();
    const first = await p.mint({ ttlDays: 10 });
    await advanceClock(5 * DAY);
    const rotated = await api<Issued>(p.ownerToken, "POST", `${p.keys}/${first.key.id}/rotate`);
    expect(rotated.status).toBe(201);
    const successor = rotated.body;
    expect(successor.plaintext).toMatch(/^rk_live_/);
    expect(successor.key).toMatchObject({ predecessorId: first.key.id, status: "active" });
    // The successor keeps the predecessor's lifetime.
    expect(
      Date.parse(successor.key.expiresAt ?? "") - Date.parse(first.key.expiresAt ?? ""),
    ).toBeGreaterThan(4 * DAY * 1000);
    const listed = await api<{ keys: Key[] }>(p.ownerToken, "GET", p.keys);
    expect(listed.body.keys.find((k) => k.id === first.key.id)?.successorId).toBe(successor.key.id);
    expect((await p.call(first.plaintext)).status).toBe(202);
    expect((await p.call(successor.plaintext)).status).toBe(202);

    // In grace, the caller learns a usable successor exists.
    await advanceClock(5 * DAY);
    const grace = await p.call(first.plaintext);
    expect(grace.headers["x-relay-key-status"]).toBe("expired_grace");
    expect(grace.headers["x-relay-key-successor-available"]).toBe("true");
  });

  test("rotating a revoked or expired key is 409 key_not_active; unknown and foreign ids are 404", async () => {
    const p = await setup();
    const other = await setup();
    const revoked = await p.mint({});
    await api(p.ownerToken, "DELETE", `${p.keys}/${revoked.key.id}`);
    const refused = await api(p.ownerToken, "POST", `${p.keys}/${revoked.key.id}/rotate`);
    expect(refused.status).toBe(409);
    expect(refused.body.error).toMatchObject({ code: "key_not_active" });

    const foreign = await other.mint({});
    for (const id of ["key_nope", foreign.key.id]) {
      for (const [method, path] of [
        ["POST", `${p.keys}/${id}/rotate`],
        ["DELETE", `${p.keys}/${id}`],
        ["POST", `${p.keys}/${id}/reveal-successor`],
      ] as const) {
        const answer = await api(p.ownerToken, method, path);
        expect(answer.status, `${method} ${path}`).toBe(404);
      }
    }
    expect((await other.call(foreign.plaintext)).status).toBe(202);
  });
});

describe("auto-rotation", () => {
  test("runs as a daily Temporal Schedule that operators can see", async () => {
    const connection = await Connection.connect({ address: stack().temporalAddress });
    try {
      const client = new Client({ connection });
      const schedule = await client.schedule.getHandle("relay-key-rotation").describe();
      expect(schedule.action).toMatchObject({ type: "startWorkflow", workflowType: "rotateKeys" });
      expect(schedule.spec.intervals?.[0]?.every).toBe(86_400_000);
    } finally {
      await connection.close();
    }
  });

  test("a key 7 days from expiry gets one sealed successor, revealed once, then 410", async () => {
    const p = await setup();
    const due = await p.mint({ ttlDays: 7 });
    const notDue = await p.mint({ ttlDays: 30 });

    await runRotation();
    await runRotation(); // the same day again: still one successor
    const listed = await api<{ keys: Key[] }>(p.ownerToken, "GET", p.keys);
    const successors = listed.body.keys.filter((k) => k.predecessorId === due.key.id);
    expect(successors).toHaveLength(1);
    expect(listed.body.keys.filter((k) => k.predecessorId === notDue.key.id)).toHaveLength(0);

    const revealed = await api<Issued>(
      p.ownerToken,
      "POST",
      `${p.keys}/${due.key.id}/reveal-successor`,
    );
    expect(revealed.status).toBe(200);
    expect(revealed.body.key.id).toBe(successors[0]?.id);
    expect(revealed.body.key.expiresAt).not.toBeNull();
    expect((await p.call(revealed.body.plaintext)).status).toBe(202);

    const again = await api(p.ownerToken, "POST", `${p.keys}/${due.key.id}/reveal-successor`);
    expect(again.status).toBe(410);
    expect(again.body.error).toMatchObject({ code: "successor_already_revealed" });
    const none = await api(p.ownerToken, "POST", `${p.keys}/${notDue.key.id}/reveal-successor`);
    expect(none.status).toBe(404);

    // The sealed copy is gone, and no plaintext was ever stored.
    const sql = postgres(stack().databaseUrl, { max: 1 });
    try {
      const [row] =
        await sql`select sealed_plaintext, revealed_at from api_keys where id = ${revealed.body.key.id}`;
      expect(row?.sealed_plaintext).toBeNull();
      expect(row?.revealed_at).not.toBeNull();
      const dump = JSON.stringify(await sql`select * from api_keys`);
      expect(dump).not.toContain(revealed.body.plaintext.slice(8));
      expect(dump).not.toContain(due.plaintext.slice(8));
    } finally {
      await sql.end();
    }
  });
});

describe("policy and roles", () => {
  async function withEditor() {
    const p = await setup();
    const editor = await api<{ token: string }>(p.ownerToken, "POST", `${p.base}/members`, {
      name: "ed",
      role: "editor",
    });
    expect(editor.status).toBe(201);
    return { ...p, editorToken: editor.body.token };
  }

  test("members: owners add and remove them; an editor's token stops working once removed", async () => {
    const p = await withEditor();
    const members = await api<{ members: { id: string; role: string }[] }>(
      p.ownerToken,
      "GET",
      `${p.base}/members`,
    );
    const editor = members.body.members.find((m) => m.role === "editor");
    const owner = members.body.members.find((m) => m.role === "owner");
    expect((await api(p.editorToken, "DELETE", `${p.base}/members/${owner?.id}`)).status).toBe(403);
    expect((await api(p.ownerToken, "DELETE", `${p.base}/members/${owner?.id}`)).status).toBe(409);
    expect((await api(p.ownerToken, "DELETE", `${p.base}/members/${editor?.id}`)).status).toBe(204);
    expect((await api(p.editorToken, "GET", `${p.base}/keys`)).status).toBe(401);
  });

  test("only owners change the policy; editors read it", async () => {
    const p = await withEditor();
    const policy = {
      defaultKeyTtlDays: 30,
      maxKeyTtlDays: 90,
      editorsMayCreateNonExpiringKeys: false,
    };
    expect((await api(p.editorToken, "PUT", `${p.base}/policy`, policy)).status).toBe(403);
    expect((await api(p.ownerToken, "PUT", `${p.base}/policy`, policy)).status).toBe(200);
    expect((await api(p.editorToken, "GET", `${p.base}/policy`)).body).toEqual(policy);
  });

  test("editors are bound by the cap and the non-expiring rule; owners are not", async () => {
    const p = await withEditor();
    await api(p.ownerToken, "PUT", `${p.base}/policy`, {
      defaultKeyTtlDays: 30,
      maxKeyTtlDays: 90,
      editorsMayCreateNonExpiringKeys: false,
    });
    const mint = (token: string, body: Record<string, unknown>) =>
      api<Issued>(token, "POST", p.keys, { name: "k", mode: "test", ...body });

    const over = await mint(p.editorToken, { ttlDays: 91 });
    expect(over.status).toBe(403);
    expect(over.body).toMatchObject({ error: { code: "policy_violation" } });
    const forever = await mint(p.editorToken, { ttlDays: null });
    expect(forever.body).toMatchObject({ error: { code: "policy_violation" } });
    expect((await mint(p.editorToken, { ttlDays: 90 })).status).toBe(201);
    const defaulted = await mint(p.editorToken, {});
    expect(Date.parse(defaulted.body.key.expiresAt ?? "") - Date.now()).toBeGreaterThan(
      29 * DAY * 1000,
    );
    expect((await mint(p.ownerToken, { ttlDays: 3650 })).status).toBe(201);
    expect((await mint(p.ownerToken, { ttlDays: null })).body.key.expiresAt).toBeNull();
  });

  test("no policy default and no ttlDays: a key that never expires", async () => {
    const p = await setup();
    expect((await p.mint({})).key.expiresAt).toBeNull();
  });
});

describe("bad input: a 4xx with the error body, nothing written", () => {
  test.each([
    ["malformed JSON", "{nope"],
    ["an unknown field", { name: "k", mode: "live", color: "red" }],
    ["a wrong type", { name: 7, mode: "live" }],
    ["ttlDays 0", { name: "k", mode: "live", ttlDays: 0 }],
    ["ttlDays negative", { name: "k", mode: "live", ttlDays: -1 }],
    ["ttlDays fractional", { name: "k", mode: "live", ttlDays: 1.5 }],
    ["ttlDays huge", { name: "k", mode: "live", ttlDays: 1e12 }],
    ["a 10 kB name", { name: "n".repeat(10_000), mode: "live" }],
  ])("%s", async (_, body) => {
    const { slug, ownerToken } = await newProject();
    const answer = await api(ownerToken, "POST", `/projects/${slug}/keys`, body);
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({
      error: { code: "bad_request", message: expect.any(String) },
    });
    expect(
      (await api<{ keys: unknown[] }>(ownerToken, "GET", `/projects/${slug}/keys`)).body.keys,
    ).toEqual([]);
  });

  test("the dev clock routes are admin-only", async () => {
    const { ownerToken } = await newProject();
    expect((await api(ownerToken, "POST", "/admin/clock", { advanceSeconds: 1 })).status).toBe(403);
    expect((await api(ownerToken, "POST", "/admin/rotation/run")).status).toBe(403);
  });
});

test("an auto-rotated successor's lifetime is clamped to the policy's maximum", async () => {
  const p = await setup();
  await api(p.ownerToken, "PUT", `${p.base}/policy`, {
    defaultKeyTtlDays: 30,
    maxKeyTtlDays: 30,
    editorsMayCreateNonExpiringKeys: false,
  });
  // Owners ignore the cap when they mint; the rotation acts for no one and keeps to it.
  const long = await p.mint({ ttlDays: 40 });
  await advanceClock(34 * DAY);
  await runRotation();
  const listed = await api<{ keys: Key[] }>(p.ownerToken, "GET", p.keys);
  const successor = listed.body.keys.find((k) => k.predecessorId === long.key.id);
  const now = Date.parse((await admin("/admin/clock", { advanceSeconds: 0 })).body.now as string);
  expect(Date.parse(successor?.expiresAt ?? "")).toBeLessThanOrEqual(now + 30 * DAY * 1000);
});
