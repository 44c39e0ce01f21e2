/**
 * What a project's members manage in the panel, in Debian's Chromium against the real stack: the
 * key policy by role, an auto-rotated key's successor, the notification URL and its secret, and
 * members with an expiry who rotate their own tokens.
 */
import { expect, test } from "vitest";
import { api, newProject, stack, targetServer } from "./helpers.ts";
import {
  expectEveryControlLabelled,
  openSection,
  panelBrowser,
  screenshot,
  signIn,
} from "./panel-browser.ts";

const { newPage, closeAfter } = panelBrowser();

test("an editor sees the key policy read-only; an owner saves it", async () => {
  const { slug, ownerToken } = await newProject();
  const added = await api<{ token: string; member: { id: string } }>(
    ownerToken,
    "POST",
    `/projects/${slug}/members`,
    { name: "erin", role: "editor" },
  );
  const editor = await newPage();
  await signIn(editor, added.body.token);
  await editor.waitForURL(`**/panel/${slug}`);
  await openSection(editor, "Key policy");
  await editor.getByText("Only owners can change the key policy.").waitFor();
  expect(await editor.getByLabel("Default lifetime (days)").isDisabled()).toBe(true);
  expect(await editor.getByLabel("Editors may create keys that never expire").isDisabled()).toBe(
    true,
  );
  expect(await editor.getByRole("button", { name: "Save policy" }).count()).toBe(0);
  await screenshot(editor, "panel-policy-editor");

  const owner = await newPage();
  await signIn(owner, ownerToken);
  await owner.waitForURL(`**/panel/${slug}`);
  await owner.goto(`/panel/${slug}/policy`);
  await owner.getByLabel("Longest lifetime editors may choose (days)").fill("30");
  await owner.getByRole("button", { name: "Save policy" }).click();
  await owner.getByText("Saved.").waitFor();
  const policy = await api(ownerToken, "GET", `/projects/${slug}/policy`);
  expect(policy.body).toMatchObject({ maxKeyTtlDays: 30 });

  // The editor's token is removed: the editor's next page says so instead of going blank.
  await api(ownerToken, "DELETE", `/projects/${slug}/members/${added.body.member.id}`);
  await openSection(editor, "API keys");
  await editor.getByText("Your token is no longer accepted").waitFor();
  await editor.getByRole("button", { name: "Forget this token and sign in again" }).click();
  await editor.getByLabel("Member token").waitFor();
}, 120_000);

test("an auto-rotated successor is revealed once", async () => {
  const { slug, ownerToken } = await newProject();
  const minted = await api<{ key: { id: string } }>(ownerToken, "POST", `/projects/${slug}/keys`, {
    name: "expiring",
    mode: "live",
    ttlDays: 3,
  });
  // The daily rotation, run now: a key 3 days from expiry gets a successor.
  await api(stack().adminToken, "POST", "/admin/rotation/run");
  const page = await newPage();
  await signIn(page, ownerToken);
  await page.waitForURL(`**/panel/${slug}`);
  await openSection(page, "API keys");

  await page.getByRole("button", { name: "Reveal the successor of expiring" }).click();
  await page.getByRole("heading", { name: /Revealed successor/ }).waitFor();
  const plaintext = (await page.getByTestId("plaintext").textContent()) ?? "";
  expect(plaintext).toMatch(/^rk_live_/);
  const keys = await api<{ keys: { id: string; predecessorId: string | null }[] }>(
    ownerToken,
    "GET",
    `/projects/${slug}/keys`,
  );
  expect(keys.body.keys.some((k) => k.predecessorId === minted.body.key.id)).toBe(true);

  await page.getByRole("button", { name: "I have copied it" }).click();
  await page.getByRole("button", { name: "Reveal the successor of expiring" }).click();
  await page.getByText("this successor was already revealed").waitFor();
  expect(await page.content()).not.toContain(plaintext);
}, 120_000);

test("a notification URL set in the panel shows its secret once; rotated, then removed", async () => {
  const receiver = await targetServer();
  closeAfter(receiver.close);
  const { slug, ownerToken } = await newProject();
  const page = await newPage();
  await signIn(page, ownerToken);
  await page.waitForURL(`**/panel/${slug}`);
  await openSection(page, "Notifications");
  // The API answers NotFound while none is set: the page says so, not that something failed.
  await page.getByText("No notification URL is set").waitFor();
  await expectEveryControlLabelled(page);

  await page.getByLabel("Notification URL").fill(receiver.url);
  await page.getByRole("button", { name: "Set URL" }).click();
  const secret = (await page.getByTestId("notification-secret").textContent()) ?? "";
  expect(secret).toMatch(/^whsec_/);
  await page.getByTestId("notification-current").getByText(receiver.url).waitFor();
  const set = await api(ownerToken, "GET", `/projects/${slug}/notifications`);
  expect(set.body).toMatchObject({ url: receiver.url });
  await screenshot(page, "panel-notifications");
  await page.reload();
  await page.getByTestId("notification-current").getByText(receiver.url).waitFor();
  expect(await page.content()).not.toContain(secret);

  await page.getByRole("button", { name: "Rotate secret" }).click();
  await page.getByRole("button", { name: "Yes, rotate it" }).click();
  const rotated = (await page.getByTestId("notification-secret").textContent()) ?? "";
  expect(rotated).toMatch(/^whsec_/);
  expect(rotated).not.toBe(secret);
  await page.getByRole("button", { name: "I have copied it" }).click();
  expect(await page.content()).not.toContain(rotated);

  await page.getByRole("button", { name: "Remove notification URL" }).click();
  await page.getByRole("button", { name: "Yes, remove it" }).click();
  await page.getByText("No notification URL is set").waitFor();
  expect((await api(ownerToken, "GET", `/projects/${slug}/notifications`)).status).toBe(404);
}, 120_000);

test("an owner adds a member with an expiry; the member rotates its own token and stays signed in", async () => {
  const { slug, ownerToken } = await newProject();
  const owner = await newPage();
  await signIn(owner, ownerToken);
  await owner.waitForURL(`**/panel/${slug}`);
  await openSection(owner, "Members");
  await expectEveryControlLabelled(owner);
  const clock = await api(stack().adminToken, "POST", "/admin/clock", { advanceSeconds: 0 });
  // datetime-local takes the browser's local time; both run in this machine's zone.
  const expires = new Date(Date.parse(clock.body.now as string) + 30 * 86_400_000);
  const local = new Date(expires.getTime() - expires.getTimezoneOffset() * 60_000);
  await owner.getByLabel("Name", { exact: true }).fill("contractor");
  await owner.getByLabel("Token expires").fill(local.toISOString().slice(0, 16));
  await owner.getByRole("button", { name: "Add member" }).click();
  const token = (await owner.getByTestId("member-token").textContent()) ?? "";
  expect(token).toMatch(/^rmt_/);
  await owner.getByRole("button", { name: "I have copied it" }).click();
  const listed = await api<{ members: { name: string; expiresAt: string | null }[] }>(
    ownerToken,
    "GET",
    `/projects/${slug}/members`,
  );
  const added = listed.body.members.find((m) => m.name === "contractor");
  expect(Math.abs(Date.parse(added?.expiresAt ?? "") - expires.getTime())).toBeLessThan(60_000);

  const member = await newPage();
  await signIn(member, token);
  await member.waitForURL(`**/panel/${slug}`);
  await openSection(member, "Members");
  // An editor adds no one and removes no one, but rotates its own token.
  expect(await member.getByRole("button", { name: "Add member" }).count()).toBe(0);
  expect(await member.getByRole("button", { name: "Rotate token of owner" }).count()).toBe(0);
  await member.getByRole("button", { name: "Rotate token of contractor" }).click();
  await member.getByRole("button", { name: "Yes, rotate" }).click();
  const rotated = (await member.getByTestId("member-token").textContent()) ?? "";
  expect(rotated).toMatch(/^rmt_/);
  expect(rotated).not.toBe(token);
  expect((await api(token, "GET", `/projects/${slug}/members`)).status).toBe(401);
  expect((await api(rotated, "GET", `/projects/${slug}/members`)).status).toBe(200);
  // This browser keeps working with the new token.
  await member.getByRole("button", { name: "I have copied it" }).click();
  await member.reload();
  await member.getByRole("row", { name: /contractor \(you\)/ }).waitFor();
  await openSection(member, "API keys");
  await member.getByRole("heading", { name: "Mint a key" }).waitFor();
  expect(await member.getByText("Your token is no longer accepted").count()).toBe(0);
}, 120_000);
