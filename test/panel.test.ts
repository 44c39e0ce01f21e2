/**
 * The browser panel, in Debian's Chromium driven by playwright-core, against the real stack:
 * everything a member does here goes through the page, and what the page says is checked
 * against what the relay and the targets saw. `RELAY_SCREENSHOTS=1` also writes the main pages
 * to docs/ (docs/panel.md shows them).
 */
import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { promisify } from "node:util";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import {
  api,
  eventually,
  newProject,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
  verifiesSignature,
} from "./helpers.ts";

let browser: Browser;
const contexts: BrowserContext[] = [];
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  // Playwright starts the browser with a new, empty profile directory of its own.
  browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    chromiumSandbox: false,
    args: [
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
});

afterAll(async () => {
  for (const context of contexts) await context.close();
  await browser?.close();
  await Promise.all(closers.map((close) => close()));
});

/** A fresh browser profile's page that may use the clipboard, as a member's would. */
async function newPage(): Promise<Page> {
  const context = await browser.newContext({
    baseURL: stack().controlUrl,
    permissions: ["clipboard-read", "clipboard-write"],
    viewport: { width: 1280, height: 900 },
  });
  contexts.push(context);
  return context.newPage();
}

async function screenshot(page: Page, name: string) {
  if (!process.env.RELAY_SCREENSHOTS) return;
  await mkdir("docs", { recursive: true });
  await page.screenshot({ path: `docs/${name}.png`, fullPage: true });
}

async function signIn(page: Page, token: string) {
  await page.goto("/");
  await page.getByLabel("Member token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/** A section of the project, from the navigation every project page has. */
function openSection(page: Page, name: string) {
  return page.getByRole("navigation", { name: "Project" }).getByRole("link", { name }).click();
}

const clipboard = (page: Page) => page.evaluate(() => navigator.clipboard.readText());

/** Every form control on the page has a label a screen reader announces with it. */
async function expectEveryControlLabelled(page: Page) {
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select, textarea")]
      .filter((el) => (el as HTMLInputElement).labels?.length === 0)
      .map((el) => el.outerHTML),
  );
  expect(unlabelled).toEqual([]);
}

test("an owner creates an endpoint, mints a key once, and the copied example is delivered", async () => {
  const target = await targetServer();
  closers.push(target.close);
  const { slug, ownerToken } = await newProject();
  const page = await newPage();

  await signIn(page, ownerToken);
  await page.waitForURL(`**/panel/${slug}`);
  await page.getByLabel("Line key").fill("v1");
  await page.getByRole("button", { name: "Add line" }).click();
  await page.getByRole("link", { name: "New endpoint in v1" }).click();
  await expectEveryControlLabelled(page);
  await page.getByLabel("Endpoint path").fill("orders");
  await page.getByLabel("Name", { exact: true }).fill("billing");
  await page.getByLabel("Target URL").fill(target.url);
  await page.getByLabel("JSON Schema").fill(
    JSON.stringify({
      type: "object",
      required: ["orderId", "amount", "email"],
      properties: {
        orderId: { type: "string", minLength: 10 },
        amount: { type: "integer", minimum: 5 },
        email: { type: "string", format: "email" },
      },
      additionalProperties: false,
    }),
  );
  await page.getByRole("button", { name: "Create endpoint" }).click();
  // The signing secret exists only in the create answer: shown once before moving on.
  const signingSecret = (await page.getByTestId("signing-secret").textContent()) ?? "";
  expect(signingSecret).toMatch(/^whsec_/);
  await page.getByRole("button", { name: "I have copied it: go to the endpoint" }).click();
  await page.waitForURL(`**/panel/${slug}/endpoints/v1/orders`);
  expect(await page.content()).not.toContain(signingSecret);

  const inbound = `http://${slug}.localhost:${stack().edgePort}/v1/orders`;
  expect(await page.getByTestId("inbound-url").textContent()).toBe(inbound);
  await page.getByRole("button", { name: "Copy example request" }).click();
  await page.getByText("Copied.").waitFor();
  const example = await clipboard(page);
  expect(example).toBe(await page.getByTestId("example-curl").textContent());
  expect(example).toContain("Authorization: Bearer <API_KEY>");
  await screenshot(page, "panel-endpoint");

  await openSection(page, "API keys");
  await page.getByLabel("Name").fill("backend");
  await page.getByRole("button", { name: "Mint key" }).click();
  const shown = page.getByTestId("plaintext");
  const plaintext = (await shown.textContent()) ?? "";
  expect(plaintext).toMatch(/^rk_live_/);
  await page.getByText("It is shown only this once").waitFor();
  await page.getByRole("button", { name: "Copy key" }).click();
  await page.getByText("Copied.").waitFor();
  expect(await clipboard(page)).toBe(plaintext);
  await screenshot(page, "panel-keys");
  await page.getByRole("button", { name: "I have copied it" }).click();
  await page.reload();
  await page.getByRole("row", { name: /backend/ }).waitFor();
  expect(await page.content()).not.toContain(plaintext);

  // The member pastes the example into a shell with the key filled in.
  const { stdout } = await promisify(execFile)("sh", [
    "-c",
    example.replace("<API_KEY>", plaintext),
  ]);
  const answer = JSON.parse(stdout) as { status: string; requestId: string };
  expect(answer.status).toBe("queued");
  await eventually(async () => target.received.length === 1);
  const delivered = target.received[0];
  const sent = JSON.parse(delivered?.body ?? "") as Record<string, unknown>;
  expect(Object.keys(sent).sort()).toEqual(["amount", "email", "orderId"]);
  // Signed with the secret the panel showed, as a Standard Webhooks verifier checks it.
  expect(delivered && (await verifiesSignature(signingSecret, delivered))).toBe(true);

  await openSection(page, "Request log");
  await page
    .locator(`[data-request-id="${answer.requestId}"][data-status="delivered"]`)
    .waitFor({ timeout: 30_000 });
  await expectEveryControlLabelled(page);
  await screenshot(page, "panel-requests");

  await page.getByRole("link", { name: answer.requestId }).click();
  await page.locator('[data-outcome="delivered"]').getByText("HTTP 200").waitFor();
  // The Temporal UI shows every project's workflows: members get this timeline, not a link there
  // (unless the deployment declares its UI member-safe).
  expect(await page.getByRole("link", { name: /Temporal UI/ }).count()).toBe(0);
  expect(await page.getByText("Workflow", { exact: true }).count()).toBe(0);

  await openSection(page, "Usage");
  await page.getByTestId("live-used").getByText("1", { exact: true }).waitFor();
  await page.getByRole("img", { name: /^1 deliveries in the last 24 hours/ }).waitFor();
  await screenshot(page, "panel-usage");
}, 120_000);

test("a delivery the target refuses shows in the failure queue, and a replay delivers it", async () => {
  const state = { healed: false };
  const target = await targetServer(() => ({ status: state.healed ? 200 : 400 }));
  closers.push(target.close);
  const p = await projectWithEndpoint([{ name: "picky", targetUrl: target.url }]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":1}' })).json();
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);

  await openSection(page, "Failure queue");
  await page.locator(`[data-request-id="${requestId}"][data-status="failed"]`).waitFor();
  await page.getByRole("link", { name: requestId }).click();
  await page.locator('[data-outcome="failed"]').getByText("HTTP 400").waitFor();

  state.healed = true;
  await page.getByRole("button", { name: "Replay failed targets" }).click();
  await page.getByTestId("request-status").getByText("delivered").waitFor({ timeout: 30_000 });
  const steps = await page
    .locator("[data-outcome]")
    .evaluateAll((items) => items.map((item) => item.getAttribute("data-outcome")));
  expect(steps).toEqual(["failed", "delivered"]);
  expect(target.received).toHaveLength(2);
  await screenshot(page, "panel-request");

  // A second failure, replayed from the queue with "Replay all".
  state.healed = false;
  const second = (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":2}' })).json();
  await openSection(page, "Failure queue");
  await page.locator(`[data-request-id="${second.requestId}"]`).waitFor({ timeout: 30_000 });
  await screenshot(page, "panel-failures");
  state.healed = true;
  await page.getByRole("button", { name: "Replay all" }).click();
  await page.getByRole("button", { name: "Yes, replay all" }).click();
  await page.getByText("Replaying 1 request.").waitFor();
  await page.getByText("No requests match.").waitFor({ timeout: 30_000 });
}, 120_000);

test("the API's refusals appear next to the fields they concern", async () => {
  const { slug, ownerToken } = await newProject();
  await api(ownerToken, "POST", `/projects/${slug}/lines`, { key: "v1" });
  const page = await newPage();
  await signIn(page, ownerToken);
  await page.waitForURL(`**/panel/${slug}`);
  await page.goto(`/panel/${slug}/endpoints/new?line=v1`);

  await page.getByLabel("Endpoint path").fill("orders");
  await page.getByLabel("Name", { exact: true }).fill("billing");
  await page.getByLabel("Target URL").fill("ftp://billing.example.com/hook");
  await page.getByLabel("IP allowlist").fill("203.0.113.0/24\n10.0.0.0/99");
  await page.getByLabel("JSON Schema").fill('{"type": "nonsense"}');
  await page.getByRole("button", { name: "Create endpoint" }).click();

  const targetUrl = page.getByLabel("Target URL");
  await page.getByText("Not saved: see the messages next to the fields.").waitFor();
  expect(await targetUrl.getAttribute("aria-invalid")).toBe("true");
  expect(await describedBy(page, "Target URL")).toMatch(/http/i);
  expect(await describedBy(page, "IP allowlist")).toContain("line 2: must be an IPv4 or IPv6 CIDR");
  expect(await describedBy(page, "JSON Schema")).toContain("not a usable JSON Schema");
  await screenshot(page, "panel-endpoint-errors");

  // What the browser can tell by itself is said before anything is sent.
  await page.getByLabel("JSON Schema").fill("{ not json");
  expect(await page.getByText("Not yet a schema: not valid JSON").count()).toBe(1);

  await page.goto(`/panel/${slug}/keys`);
  await page.getByLabel("Name").fill("forever");
  await page.getByLabel("Lifetime (days)").fill("5000");
  await page.getByRole("button", { name: "Mint key" }).click();
  await page.getByLabel("Lifetime (days)").and(page.locator('[aria-invalid="true"]')).waitFor();
  expect(await describedBy(page, "Lifetime (days)")).toMatch(/3650/);
}, 120_000);

/** The text a screen reader reads after a control's label: its hint and its error. */
function describedBy(page: Page, label: string) {
  return page.getByLabel(label, { exact: true }).evaluate((control) =>
    (control.getAttribute("aria-describedby") ?? "")
      .split(" ")
      .map((id) => document.getElementById(id)?.textContent ?? "")
      .join(" "),
  );
}

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

test("a wrong token and a lost control plane each get a clear message", async () => {
  const { slug, ownerToken } = await newProject();
  const page = await newPage();
  await signIn(page, "rmt_not-a-real-token");
  await page.getByText("This token was not accepted").waitFor();
  expect(await page.getByLabel("Member token").getAttribute("aria-invalid")).toBe("true");
  await screenshot(page, "panel-sign-in");

  await signIn(page, ownerToken);
  await page.waitForURL(`**/panel/${slug}`);
  // The network drops every call to the control plane's API.
  await page.route("**/relay.v1.*/**", (route) => route.abort("connectionrefused"));
  await openSection(page, "Request log");
  await page
    .getByRole("heading", { name: "The control plane cannot be reached" })
    .waitFor({ timeout: 30_000 });
  await page.unroute("**/relay.v1.*/**");
  await page.getByRole("button", { name: "Try again" }).click();
  await page.getByText("No requests match.").waitFor();
}, 120_000);

test("the admin token is refused at sign-in and never kept, not even one kept before", async () => {
  const { slug } = await newProject();
  const page = await newPage();
  await page.goto("/");
  await page.getByLabel("Member token").fill(stack().adminToken);
  await page.getByLabel("Keep me signed in").check();
  await page.getByRole("button", { name: "Sign in" }).click();
  await page
    .getByText("the admin token is for the API; sign in with a member token", { exact: false })
    .waitFor();
  expect(await page.getByLabel("Member token").getAttribute("aria-invalid")).toBe("true");
  const kept = () =>
    page.evaluate(
      () => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }),
    );
  expect(await kept()).not.toContain(stack().adminToken);

  // A browser where an older panel kept the admin token: the panel forgets it when it loads.
  await page.evaluate(
    ([token, project]) => {
      const kept = [{ token, project, projectName: project, role: "owner", memberName: "" }];
      for (const storage of [localStorage, sessionStorage]) {
        storage.setItem("relay.panel.memberships", JSON.stringify(kept));
      }
    },
    [stack().adminToken, slug],
  );
  await page.goto(`/panel/${slug}`);
  await page.getByText(`You are not signed in to project “${slug}”`).waitFor();
  expect(await kept()).not.toContain(stack().adminToken);
}, 120_000);

test("a malformed escape in a panel URL shows the not-found page", async () => {
  const { slug, ownerToken } = await newProject();
  const page = await newPage();
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await signIn(page, ownerToken);
  await page.waitForURL(`**/panel/${slug}`);
  for (const path of [`/panel/${slug}/requests/%ZZ`, "/panel/%ZZ", `/panel/${slug}/%E0`]) {
    await page.goto(path);
    await page.getByRole("heading", { name: "Not found" }).waitFor();
  }
  // The frame is still there: the navigation leads back to the project's pages.
  await page.goto(`/panel/${slug}/endpoints/v1/%ZZ`);
  await page.getByRole("heading", { name: "Not found" }).waitFor();
  await openSection(page, "API keys");
  await page.getByRole("heading", { name: "API keys" }).waitFor();
  expect(errors).toEqual([]);
}, 120_000);

/**
 * Presses Tab until the focused element is the one named `name` (by its label, its text or its
 * aria-label), as a keyboard user moves through the page; fails when it is not reachable.
 */
async function tabTo(page: Page, name: string) {
  for (let presses = 0; presses < 60; presses++) {
    await page.keyboard.press("Tab");
    const focused = await page.evaluate(() => {
      const el = document.activeElement as HTMLInputElement | null;
      if (!el) return "";
      const label = el.labels?.[0]?.textContent;
      return (label ?? el.getAttribute("aria-label") ?? el.textContent ?? "").trim();
    });
    if (focused === name) return;
  }
  throw new Error(`"${name}" cannot be reached with Tab`);
}

test("a member signs in, mints and revokes a key with the keyboard alone", async () => {
  const { slug, ownerToken } = await newProject();
  const page = await newPage();
  await page.goto("/");
  await tabTo(page, "Member token");
  await page.keyboard.type(ownerToken);
  await page.keyboard.press("Enter");
  await page.waitForURL(`**/panel/${slug}`);

  await tabTo(page, "API keys");
  await page.keyboard.press("Enter");
  await tabTo(page, "Name");
  await page.keyboard.type("by-keyboard");
  await page.keyboard.press("Enter");
  // The one showing of the plaintext takes the focus, so it is read out at once.
  await page.getByTestId("plaintext").waitFor();
  expect(await page.evaluate(() => document.activeElement?.getAttribute("aria-labelledby"))).toBe(
    "plaintext-heading",
  );
  await tabTo(page, "I have copied it");
  await page.keyboard.press("Enter");

  await tabTo(page, "Revoke by-keyboard");
  await page.keyboard.press("Enter");
  // The confirming button has the focus: one more Enter revokes.
  expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Yes, revoke");
  await page.keyboard.press("Enter");
  await page
    .getByRole("row", { name: /by-keyboard/ })
    .getByText("revoked")
    .waitFor();
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

test("a waiting request leads to its endpoint's open circuit, where a member pauses and resumes the target", async () => {
  const target = await targetServer(() => ({ status: 503 }));
  closers.push(target.close);
  const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }], {
    circuitBreaker: { failureThreshold: 1 },
  });
  const circuit = async () =>
    (
      await api<{ targets: { state: string; paused: boolean }[] }>(
        p.ownerToken,
        "GET",
        `${p.base}/lines/v1/endpoints/hook/circuits`,
      )
    ).body.targets[0];
  await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":1}' });
  await eventually(async () => (await circuit())?.state === "open");
  // Sent once the circuit is open: it waits, with no attempt.
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":2}' })).json();
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);

  await page.goto(`/panel/${p.slug}/requests/${requestId}`);
  const waiting = page.getByTestId("request-waiting");
  await waiting.getByText("its circuit is open").waitFor();
  await waiting.getByRole("link", { name: "delivery control" }).click();
  await page.waitForURL(`**/panel/${p.slug}/endpoints/v1/hook`);
  const row = page.locator('[data-target="t"]');
  await row.getByTestId("circuit-state").getByText("open").waitFor();
  await row.getByText(/^opened · /).waitFor();

  await row.getByRole("button", { name: "Pause t" }).click();
  await row.getByTestId("circuit-paused").getByText("paused").waitFor();
  expect(await circuit()).toMatchObject({ state: "open", paused: true });
  await screenshot(page, "panel-delivery-control");
  await row.getByRole("button", { name: "Resume t" }).click();
  await row.getByTestId("circuit-paused").getByText("no").waitFor();
  expect(await circuit()).toMatchObject({ state: "open", paused: false });
  await row.getByText(/^resumed · /).waitFor();
}, 120_000);

test("a notification URL set in the panel shows its secret once; rotated, then removed", async () => {
  const receiver = await targetServer();
  closers.push(receiver.close);
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
