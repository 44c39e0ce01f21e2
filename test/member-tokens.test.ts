/**
 * Member tokens rotate and expire: a rotated token is refused at once on REST and Connect while
 * its successor works; a token created with an expiry stops working once the clock passes it.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { expect, test } from "vitest";
import { MemberService } from "../gen/relay/v1/projects_pb.ts";
import { api, memberClient, newProject, stack } from "./helpers.ts";

interface Member {
  id: string;
  name: string;
  role: string;
  expiresAt: string | null;
}

const admin = (path: string, body: unknown) => api(stack().adminToken, "POST", path, body);

async function addMember(slug: string, ownerToken: string, body: Record<string, unknown>) {
  const added = await api<{ member: Member; token: string }>(
    ownerToken,
    "POST",
    `/projects/${slug}/members`,
    body,
  );
  expect(added.status, added.text).toBe(201);
  return added.body;
}

const rotate = (token: string, slug: string, memberId: string) =>
  api<{ member: Member; token: string }>(
    token,
    "POST",
    `/projects/${slug}/members/${memberId}/rotate-token`,
  );

const listsMembers = (token: string, slug: string) =>
  api(token, "GET", `/projects/${slug}/members`).then((a) => a.status);

async function connectCode(token: string, slug: string): Promise<Code | "ok"> {
  try {
    await memberClient(MemberService, token).listMembers({ project: slug });
    return "ok";
  } catch (cause) {
    return ConnectError.from(cause).code;
  }
}

/** The control plane's time: real time plus the shared dev clock's offset. */
async function controlNow(): Promise<number> {
  return Date.parse((await admin("/admin/clock", { advanceSeconds: 0 })).body.now as string);
}

test("a member rotates its own token: the old one is refused at once, the new one works", async () => {
  const { slug, ownerToken } = await newProject();
  const editor = await addMember(slug, ownerToken, { name: "ed", role: "editor" });
  const rotated = await rotate(editor.token, slug, editor.member.id);
  expect(rotated.status, rotated.text).toBe(201);
  expect(rotated.body.member).toMatchObject({ id: editor.member.id, name: "ed", role: "editor" });
  expect(rotated.body.token).toMatch(/^rmt_/);
  expect(rotated.body.token).not.toBe(editor.token);

  expect(await listsMembers(editor.token, slug)).toBe(401);
  expect(await connectCode(editor.token, slug)).toBe(Code.Unauthenticated);
  expect(await listsMembers(rotated.body.token, slug)).toBe(200);
  expect(await connectCode(rotated.body.token, slug)).toBe("ok");
});

test("an owner rotates a member's token over Connect; an editor cannot rotate another's", async () => {
  const { slug, ownerToken } = await newProject();
  const editor = await addMember(slug, ownerToken, { name: "ed", role: "editor" });
  const other = await addMember(slug, ownerToken, { name: "other", role: "editor" });

  const refused = await rotate(editor.token, slug, other.member.id);
  expect(refused.status).toBe(403);
  expect(await listsMembers(other.token, slug)).toBe(200);

  const rotated = await memberClient(MemberService, ownerToken).rotateMemberToken({
    project: slug,
    memberId: editor.member.id,
  });
  expect(rotated.member?.id).toBe(editor.member.id);
  expect(await connectCode(editor.token, slug)).toBe(Code.Unauthenticated);
  expect(await connectCode(rotated.token, slug)).toBe("ok");
});

test("a member of another project cannot rotate this project's members", async () => {
  const mine = await newProject();
  const theirs = await newProject();
  const victim = await addMember(mine.slug, mine.ownerToken, { name: "v", role: "editor" });
  const refused = await rotate(theirs.ownerToken, mine.slug, victim.member.id);
  expect(refused.status).toBe(404);
  // Nor through their own project's path.
  expect((await rotate(theirs.ownerToken, theirs.slug, victim.member.id)).status).toBe(404);
  expect(await listsMembers(victim.token, mine.slug)).toBe(200);
  expect((await rotate(mine.ownerToken, mine.slug, "mem_unknown")).status).toBe(404);
});

test("a token created with an expiry stops working after it, like an unknown token", async () => {
  const { slug, ownerToken } = await newProject();
  const expiresAt = new Date((await controlNow()) + 3_600_000).toISOString();
  const temp = await addMember(slug, ownerToken, { name: "temp", role: "editor", expiresAt });
  expect(Date.parse(temp.member.expiresAt as string)).toBe(Date.parse(expiresAt));
  expect(await listsMembers(temp.token, slug)).toBe(200);
  // A rotation keeps the expiry an owner set.
  const rotated = await rotate(temp.token, slug, temp.member.id);
  expect(Date.parse(rotated.body.member.expiresAt as string)).toBe(Date.parse(expiresAt));

  expect((await admin("/admin/clock", { advanceSeconds: 2 * 3600 })).status).toBe(200);
  const expired = await api(rotated.body.token, "GET", `/projects/${slug}/members`);
  const unknown = await api("rmt_unknown", "GET", `/projects/${slug}/members`);
  expect(expired.status).toBe(401);
  expect(expired.body).toEqual(unknown.body);
  expect(await connectCode(rotated.body.token, slug)).toBe(Code.Unauthenticated);
  expect(await listsMembers(ownerToken, slug)).toBe(200);
});

test("an expiry in the past or more than a year ahead is a 400", async () => {
  const { slug, ownerToken } = await newProject();
  const now = await controlNow();
  for (const at of [now - 60_000, now + 367 * 86_400_000]) {
    const refused = await api(ownerToken, "POST", `/projects/${slug}/members`, {
      name: "x",
      role: "editor",
      expiresAt: new Date(at).toISOString(),
    });
    expect(refused.status, refused.text).toBe(400);
    expect((refused.body as { error: { code: string } }).error.code).toBe("bad_request");
  }
});
