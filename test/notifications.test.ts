/**
 * Operational notifications: the project's URL and secret over REST and Connect (the secret shown
 * once, the URL checked as a target URL is), and the worker's sender, called directly with the
 * stack's database and sealing key, checked as a receiver would: with the `standardwebhooks`
 * library and the secret as shown.
 */
import { readFile } from "node:fs/promises";
import { Code, ConnectError } from "@connectrpc/connect";
import { Webhook } from "standardwebhooks";
import { afterAll, describe, expect, test } from "vitest";
import type { NotificationEvent } from "../core/notifications.ts";
import { importSealingKey } from "../core/sealing.ts";
import { NotificationService } from "../gen/relay/v1/notifications_pb.ts";
import { targetCaller, targetDispatcher } from "../platform/targets.ts";
import { connect } from "../store/db.ts";
import { notifier } from "../workflows/notify.ts";
import { api, memberClient, newProject, stack, targetServer } from "./helpers.ts";

type Settings = { url: string; createdAt: string; secret?: string };

const receiver = await targetServer();
const failing = await targetServer(() => ({ status: 500 }));
const redirecting = await targetServer(() => ({
  status: 307,
  headers: { location: receiver.url },
}));
const sql = connect(stack().databaseUrl, { max: 2 });
const dispatcher = targetDispatcher({ allowPrivate: true }, { connections: 4 });
const notify = notifier({
  sql,
  sealingKey: await importSealingKey(stack().encryptionKey),
  callTarget: targetCaller(dispatcher),
  now: async () => new Date(),
});
afterAll(async () => {
  await Promise.all([receiver.close(), failing.close(), redirecting.close()]);
  await dispatcher.close();
  await sql.end();
});

const settingsOf = (p: { slug: string }) => `/projects/${p.slug}/notifications`;

/** A project with its notification URL set to `url`; the secret its first set showed. */
async function withUrl(url: string) {
  const project = await newProject();
  const set = await api<Settings>(project.ownerToken, "PUT", settingsOf(project), { url });
  expect(set.status, set.text).toBe(200);
  return { ...project, secret: set.body.secret as string };
}

const eventOf = (project: string, id = `ntf_${Date.now()}`): NotificationEvent => ({
  id,
  type: "request.failed",
  project,
  at: "2025-01-02T03:04:05.000Z",
  data: { requestId: "req_1", line: "v1", endpoint: "hook", status: "failed", targets: [] },
});

describe("the notification settings", () => {
  test("set, read, change, rotate and delete; each secret is shown once, never stored plain", async () => {
    const p = await newProject();
    const path = settingsOf(p);
    const none = await api(p.ownerToken, "GET", path);
    expect(none.status).toBe(404);
    expect(none.body).toEqual({ error: { code: "not_found", message: expect.any(String) } });

    const set = await api<Settings>(p.ownerToken, "PUT", path, { url: receiver.url });
    expect(set.status, set.text).toBe(200);
    expect(set.body).toEqual({
      url: receiver.url,
      createdAt: expect.any(String),
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const read = await api<Settings>(p.ownerToken, "GET", path);
    expect(read.body).toEqual({ url: receiver.url, createdAt: set.body.createdAt });

    // A later set changes the URL and keeps the secret, which it does not show.
    const changed = await api<Settings>(p.ownerToken, "PUT", path, { url: failing.url });
    expect(changed.status).toBe(200);
    expect(changed.body).toEqual({ url: failing.url, createdAt: set.body.createdAt });

    const rotated = await api<Settings>(p.ownerToken, "POST", `${path}/rotate-secret`);
    expect(rotated.status, rotated.text).toBe(201);
    expect(rotated.body).toEqual({
      url: failing.url,
      createdAt: set.body.createdAt,
      secret: expect.stringMatching(/^whsec_/),
    });
    expect(rotated.body.secret).not.toBe(set.body.secret);
    for (const again of [await api(p.ownerToken, "GET", path), changed]) {
      expect(again.text).not.toContain("whsec_");
      expect(again.text).not.toContain("secret");
    }

    const secrets = [set.body.secret as string, rotated.body.secret as string];
    const rows = await sql<{ row: string }[]>`
      select n::text as row from notification_settings n
      join projects p on p.id = n.project_id where p.slug = ${p.slug}`;
    expect(rows).toHaveLength(1);
    const log = await readFile(stack().logFile, "utf8");
    for (const secret of secrets) {
      const bare = secret.slice("whsec_".length);
      expect(rows[0]?.row).not.toContain(bare);
      expect(rows[0]?.row).not.toContain(Buffer.from(bare, "base64").toString("hex"));
      expect(log).not.toContain(bare);
    }

    const deleted = await api(p.ownerToken, "DELETE", path);
    expect(deleted.status).toBe(204);
    expect((await api(p.ownerToken, "GET", path)).status).toBe(404);
    expect((await api(p.ownerToken, "DELETE", path)).status).toBe(404);
    expect((await api(p.ownerToken, "POST", `${path}/rotate-secret`)).status).toBe(404);
  });

  test("a URL to the relay itself, a malformed or an overlong one is 400 naming the field", async () => {
    const p = await newProject();
    const refused = async (body: unknown) => {
      const answer = await api(p.ownerToken, "PUT", settingsOf(p), body);
      expect(answer.status, JSON.stringify(body)).toBe(400);
      expect(answer.body).toMatchObject({ error: { code: "bad_request" } });
      return answer.body.error as { details: { path: string; message: string }[] };
    };
    const relayItself = `http://${p.slug}.localhost:${stack().edgePort}/v1/hook`;
    expect((await refused({ url: relayItself })).details).toEqual([
      { path: "url", message: "points at the relay itself" },
    ]);
    expect((await refused({ url: "not a url" })).details).toEqual([
      { path: "url", message: "must be an http or https URL" },
    ]);
    expect((await refused({ url: "ftp://example.com/x" })).details[0]?.path).toBe("url");
    expect((await refused({ url: `https://example.com/${"a".repeat(2048)}` })).details).toEqual([
      { path: "url", message: expect.stringContaining("2048") },
    ]);
    await refused({ url: "https://user:pass@example.com/" });
    await refused({});
    await refused({ url: receiver.url, secret: "whsec_mine" });
    // Nothing was set.
    expect((await api(p.ownerToken, "GET", settingsOf(p))).status).toBe(404);
  });

  test("an editor manages it; another project's member gets 404, no token 401", async () => {
    const p = await newProject();
    const editor = await api<{ token: string }>(
      p.ownerToken,
      "POST",
      `/projects/${p.slug}/members`,
      {
        name: "ed",
        role: "editor",
      },
    );
    const set = await api<Settings>(editor.body.token, "PUT", settingsOf(p), { url: receiver.url });
    expect(set.status).toBe(200);
    expect(set.body.secret).toMatch(/^whsec_/);
    expect((await api(editor.body.token, "POST", `${settingsOf(p)}/rotate-secret`)).status).toBe(
      201,
    );

    const other = await newProject();
    for (const [method, path] of [
      ["GET", settingsOf(p)],
      ["PUT", settingsOf(p)],
      ["POST", `${settingsOf(p)}/rotate-secret`],
      ["DELETE", settingsOf(p)],
    ] as const) {
      const foreign = await api(
        other.ownerToken,
        method,
        path,
        method === "PUT" ? { url: receiver.url } : undefined,
      );
      expect(foreign.status, `${method} ${path}`).toBe(404);
      expect(foreign.body).toMatchObject({ error: { code: "not_found" } });
    }
    expect((await api(null, "GET", settingsOf(p))).status).toBe(401);
    // Still the editor's URL.
    expect((await api(p.ownerToken, "GET", settingsOf(p))).body).toMatchObject({
      url: receiver.url,
    });
  });

  test("over Connect: set (the secret once), get, rotate, delete, then NOT_FOUND", async () => {
    const p = await newProject();
    const client = memberClient(NotificationService, p.ownerToken);
    const set = await client.setNotifications({ project: p.slug, url: receiver.url });
    expect(set.notifications?.url).toBe(receiver.url);
    expect(set.secret).toMatch(/^whsec_/);
    const again = await client.setNotifications({ project: p.slug, url: failing.url });
    expect(again.secret).toBeUndefined();
    const got = await client.getNotifications({ project: p.slug });
    expect(got.notifications?.url).toBe(failing.url);
    expect(got.notifications?.createdAt).toEqual(set.notifications?.createdAt);
    const rotated = await client.rotateNotificationSecret({ project: p.slug });
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(set.secret);
    const bad = await client
      .setNotifications({ project: p.slug, url: "not a url" })
      .catch((error: unknown) => ConnectError.from(error));
    expect(bad).toMatchObject({ code: Code.InvalidArgument });
    await client.deleteNotifications({ project: p.slug });
    const gone = await client
      .getNotifications({ project: p.slug })
      .catch((error: unknown) => ConnectError.from(error));
    expect(gone).toMatchObject({ code: Code.NotFound });
  });
});

describe("the sender", () => {
  test("posts the event as JSON, signed so a Standard Webhooks library verifies it", async () => {
    const p = await withUrl(receiver.url);
    const event = eventOf(p.slug);
    expect(await notify(event)).toBe("sent");
    const received = receiver.received.find((r) => r.headers["webhook-id"] === event.id);
    expect(received).toBeDefined();
    if (!received) return;
    expect(received.headers["content-type"]).toBe("application/json");
    expect(received.headers["webhook-timestamp"]).toMatch(/^\d{10}$/);
    expect(Object.keys(received.headers).filter((h) => h.startsWith("x-relay-"))).toEqual([]);
    const payload = new Webhook(p.secret).verify(
      received.body,
      received.headers as Record<string, string>,
    );
    expect(payload).toEqual({
      type: "request.failed",
      timestamp: "2025-01-02T03:04:05.000Z",
      data: {
        requestId: "req_1",
        line: "v1",
        endpoint: "hook",
        status: "failed",
        targets: [],
        project: p.slug,
      },
    });

    // After a rotation only the new secret verifies; a retry keeps the event's id.
    const rotated = await api<Settings>(p.ownerToken, "POST", `${settingsOf(p)}/rotate-secret`);
    expect(await notify(event)).toBe("sent");
    const retried = receiver.received.filter((r) => r.headers["webhook-id"] === event.id)[1];
    if (!retried) throw new Error("the retry did not arrive");
    const headers = retried.headers as Record<string, string>;
    expect(() =>
      new Webhook(rotated.body.secret as string).verify(retried.body, headers),
    ).not.toThrow();
    expect(() => new Webhook(p.secret).verify(retried.body, headers)).toThrow();
  });

  test("a non-2xx answer, a redirect or no answer throws, naming no secret", async () => {
    const p = await withUrl(failing.url);
    const failed = await notify(eventOf(p.slug)).catch((error: Error) => error);
    expect(failed).toBeInstanceOf(Error);
    expect((failed as Error).message).toBe("notification URL answered 500");
    expect(failing.received).toHaveLength(1);

    // A redirect is the answer, not followed.
    await api(p.ownerToken, "PUT", settingsOf(p), { url: redirecting.url });
    const before = receiver.received.length;
    await expect(notify(eventOf(p.slug))).rejects.toThrow("notification URL answered 307");
    expect(receiver.received).toHaveLength(before);

    await api(p.ownerToken, "PUT", settingsOf(p), { url: "http://127.0.0.1:9/closed" });
    const unreachable = await notify(eventOf(p.slug)).catch((error: Error) => error);
    expect((unreachable as Error).message).toMatch(/^notification unreachable: /);
    const bare = p.secret.slice("whsec_".length);
    for (const error of [failed, unreachable]) expect(String(error)).not.toContain(bare);
  });

  test("a project with no URL, or none any more, is 'none': nothing is sent", async () => {
    const p = await newProject();
    expect(await notify(eventOf(p.slug))).toBe("none");
    const q = await withUrl(receiver.url);
    await api(q.ownerToken, "DELETE", settingsOf(q));
    const before = receiver.received.length;
    expect(await notify(eventOf(q.slug))).toBe("none");
    expect(await notify(eventOf("no-such-project"))).toBe("none");
    expect(receiver.received).toHaveLength(before);
  });
});
