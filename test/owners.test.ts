/**
 * A project always keeps an owner: owners removing each other at the same moment, or the admin
 * removing the only owner, leave at least one (409 `conflict` for the removal that would not).
 */
import { expect, test } from "vitest";
import { api, newProject, stack } from "./helpers.ts";

interface Member {
  id: string;
  name: string;
  role: string;
}

async function owners(slug: string): Promise<Member[]> {
  const listed = await api<{ members: Member[] }>(
    stack().adminToken,
    "GET",
    `/projects/${slug}/members`,
  );
  return listed.body.members.filter((m) => m.role === "owner");
}

/** A fresh project with two owners, each with their token and id. */
async function twoOwners() {
  const project = await newProject();
  const added = await api<{ member: Member; token: string }>(
    project.ownerToken,
    "POST",
    `/projects/${project.slug}/members`,
    { name: "second", role: "owner" },
  );
  expect(added.status).toBe(201);
  const [first] = await owners(project.slug);
  return {
    slug: project.slug,
    first: { id: first?.id as string, token: project.ownerToken },
    second: { id: added.body.member.id, token: added.body.token },
  };
}

const remove = (token: string, slug: string, memberId: string) =>
  api(token, "DELETE", `/projects/${slug}/members/${memberId}`);

test("two owners removing each other at once leave one owner, every time", async () => {
  for (let run = 0; run < 10; run++) {
    const { slug, first, second } = await twoOwners();
    const answers = await Promise.all([
      remove(first.token, slug, second.id),
      remove(second.token, slug, first.id),
    ]);
    // The loser is refused as the last owner, or, when its own removal landed first, as a
    // token that no longer exists.
    const [won, lost] = answers.sort((a, b) => a.status - b.status);
    expect(won?.status).toBe(204);
    expect([401, 409]).toContain(lost?.status);
    if (lost?.status === 409) {
      expect(lost.body).toEqual({
        error: { code: "conflict", message: "a project keeps at least one owner" },
      });
    }
    expect(await owners(slug)).toHaveLength(1);
  }
});

test("the admin cannot remove the only owner, nor both owners at once", async () => {
  const { slug, first, second } = await twoOwners();
  const both = await Promise.all([
    remove(stack().adminToken, slug, first.id),
    remove(stack().adminToken, slug, second.id),
  ]);
  expect(both.map((a) => a.status).sort()).toEqual([204, 409]);
  const [last] = await owners(slug);
  expect(last).toBeDefined();
  const refused = await remove(stack().adminToken, slug, last?.id as string);
  expect(refused.status).toBe(409);
  expect(refused.body).toEqual({
    error: { code: "conflict", message: "a project keeps at least one owner" },
  });
  expect(await owners(slug)).toHaveLength(1);
});

test("an owner may still remove an editor, and a second owner", async () => {
  const { slug, first, second } = await twoOwners();
  const editor = await api<{ member: Member }>(first.token, "POST", `/projects/${slug}/members`, {
    name: "ed",
    role: "editor",
  });
  expect((await remove(first.token, slug, editor.body.member.id)).status).toBe(204);
  expect((await remove(first.token, slug, second.id)).status).toBe(204);
  expect((await owners(slug)).map((m) => m.id)).toEqual([first.id]);
});

test("an owner whose token expires does not count: the last owner whose token never expires stays", async () => {
  const project = await newProject();
  const [first] = await owners(project.slug);
  // A day ahead on the stack's clock, which other tests may have moved.
  const clock = await api(stack().adminToken, "POST", "/admin/clock", { advanceSeconds: 0 });
  const expiresAt = new Date(Date.now() + (clock.body.offsetMs as number) + 86_400_000);
  const expiring = await api<{ member: Member; token: string }>(
    project.ownerToken,
    "POST",
    `/projects/${project.slug}/members`,
    { name: "temporary", role: "owner", expiresAt: expiresAt.toISOString() },
  );
  expect(expiring.status).toBe(201);
  const refused = await remove(expiring.body.token, project.slug, first?.id as string);
  expect(refused.status).toBe(409);
  expect(refused.body).toMatchObject({ error: { code: "conflict" } });
  expect(await owners(project.slug)).toHaveLength(2);
  expect((await remove(project.ownerToken, project.slug, expiring.body.member.id)).status).toBe(
    204,
  );
});
