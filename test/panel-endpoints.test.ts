/**
 * The panel's endpoints, in Debian's Chromium against the real stack: an owner creates one,
 * mints a key and sends the copied example, checked against what the relay and the target saw;
 * the API's refusals of an endpoint appear next to the fields they concern; and a target's
 * filter is set in the form, shown on the endpoint's page, and a call it skips says so on the
 * request's page; an async target's retry policy and its transformation are set in the form, a
 * refused one named beside its field, and shown on the endpoint's page.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
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
import {
  expectEveryControlLabelled,
  openSection,
  panelBrowser,
  screenshot,
  signIn,
} from "./panel-browser.ts";

const { newPage, closeAfter } = panelBrowser();

const clipboard = (page: Page) => page.evaluate(() => navigator.clipboard.readText());

test("an owner creates an endpoint, mints a key once, and the copied example is delivered", async () => {
  const target = await targetServer();
  closeAfter(target.close);
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

/** A new project with line `v1`, its owner signed in on the panel's new-endpoint form. */
async function newEndpointForm() {
  const { slug, ownerToken } = await newProject();
  await api(ownerToken, "POST", `/projects/${slug}/lines`, { key: "v1" });
  const page = await newPage();
  await signIn(page, ownerToken);
  await page.waitForURL(`**/panel/${slug}`);
  await page.goto(`/panel/${slug}/endpoints/new?line=v1`);
  return { slug, ownerToken, page };
}

test("the API's refusals appear next to the fields they concern", async () => {
  const { slug, page } = await newEndpointForm();

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

test("an owner sets a target's filter; the endpoint's page shows it, the form pretty-printed", async () => {
  const { slug, ownerToken, page } = await newEndpointForm();

  await page.getByLabel("Endpoint path").fill("orders");
  await page.getByLabel("Name", { exact: true }).fill("billing");
  await page.getByLabel("Target URL").fill("http://127.0.0.1:9/in");
  const filter = page.getByLabel("Filter", { exact: true });
  const create = page.getByRole("button", { name: "Create endpoint" });
  // The browser knows JSON; the API knows the filter syntax.
  await filter.fill('{"body": {"status": ');
  await create.click();
  expect(await describedBy(page, "Filter")).toContain("not valid JSON");
  await filter.fill('{"body": {"amount": {"$gte": true}}}');
  await create.click();
  await page.getByText("Not saved: see the messages next to the fields.").waitFor();
  expect(await filter.getAttribute("aria-invalid")).toBe("true");
  expect(await describedBy(page, "Filter")).toMatch(
    /body\.amount.*\$gte takes a number or a string/,
  );

  const paidOrShipped = { body: { status: { $in: ["paid", "shipped"] } } };
  await filter.fill(JSON.stringify(paidOrShipped));
  await create.click();
  await page.getByRole("button", { name: "I have copied it: go to the endpoint" }).click();
  await page.waitForURL(`**/panel/${slug}/endpoints/v1/orders`);
  expect(await page.getByTestId("target-filter").textContent()).toBe(JSON.stringify(paidOrShipped));
  expect(await filter.inputValue()).toBe(JSON.stringify(paidOrShipped, null, 2));
  const saved = await api<{ targets: { filter?: unknown }[] }>(
    ownerToken,
    "GET",
    `/projects/${slug}/lines/v1/endpoints/orders`,
  );
  expect(saved.body.targets[0]?.filter).toEqual(paidOrShipped);
}, 120_000);

test("an owner sets a target's transformation; one that does not compile is refused beside it, the saved one shown", async () => {
  const { slug, ownerToken, page } = await newEndpointForm();

  await page.getByLabel("Endpoint path").fill("orders");
  await page.getByLabel("Name", { exact: true }).fill("billing");
  await page.getByLabel("Target URL").fill("http://127.0.0.1:9/in");
  const transform = page.getByLabel("Transformation", { exact: true });
  const create = page.getByRole("button", { name: "Create endpoint" });
  // Whether it compiles is the API's to say: the sandbox that runs it checks it.
  await transform.fill("(request) => {");
  await create.click();
  await page.getByText("Not saved: see the messages next to the fields.").waitFor();
  expect(await transform.getAttribute("aria-invalid")).toBe("true");
  expect(await describedBy(page, "Transformation")).toMatch(/SyntaxError/);

  const wraps = "(request) => ({ ...request, body: { order: request.body } })";
  await transform.fill(wraps);
  await create.click();
  await page.getByRole("button", { name: "I have copied it: go to the endpoint" }).click();
  await page.waitForURL(`**/panel/${slug}/endpoints/v1/orders`);
  const shown = page.getByTestId("target-transform");
  await page.getByText("Its transformation", { exact: true }).click();
  expect(await shown.textContent()).toBe(wraps);
  expect(await transform.inputValue()).toBe(wraps);
  const saved = await api<{ targets: { transform?: string }[] }>(
    ownerToken,
    "GET",
    `/projects/${slug}/lines/v1/endpoints/orders`,
  );
  expect(saved.body.targets[0]?.transform).toBe(wraps);

  // Emptied, it is left out: the target has none.
  await transform.fill("");
  await page.getByRole("button", { name: "Save changes" }).click();
  await shown.waitFor({ state: "detached" });
}, 120_000);

test("an owner sets an async target's retries; a refused one is named beside its field, the saved ones shown", async () => {
  const { slug, ownerToken, page } = await newEndpointForm();

  await page.getByLabel("Endpoint path").fill("orders");
  await page.getByLabel("Name", { exact: true }).fill("billing");
  await page.getByLabel("Target URL").fill("http://127.0.0.1:9/in");
  const retries = page.getByRole("group", { name: "Retries" });
  await retries
    .getByText("Empty: Relay's default (from 1 s, doubling, at most 1 h apart, for 24 h)")
    .waitFor();
  await retries.getByLabel("Max attempts").fill("3");
  await retries.getByLabel("First retry after (s)").fill("2");
  const backoff = retries.getByLabel("Backoff factor");
  await backoff.fill("50");
  const create = page.getByRole("button", { name: "Create endpoint" });
  await create.click();
  await page.getByText("Not saved: see the messages next to the fields.").waitFor();
  expect(await backoff.getAttribute("aria-invalid")).toBe("true");
  // The API says where the factor ends, beside that field alone.
  expect(await describedBy(page, "Backoff factor")).toMatch(/\b10\b/);
  expect(await retries.getByLabel("Max attempts").getAttribute("aria-invalid")).toBe("false");

  // Left empty, the factor is the deployment's: only the two settings filled are sent.
  await backoff.fill("");
  await create.click();
  await page.getByRole("button", { name: "I have copied it: go to the endpoint" }).click();
  await page.waitForURL(`**/panel/${slug}/endpoints/v1/orders`);
  expect(await page.getByTestId("target-retry").textContent()).toBe(
    "retries: at most 3 attempts, from 2 s",
  );
  expect(await retries.getByLabel("Max attempts").inputValue()).toBe("3");
  expect(await retries.getByLabel("First retry after (s)").inputValue()).toBe("2");
  expect(await backoff.inputValue()).toBe("");
  const saved = await api<{ targets: { retry?: unknown }[] }>(
    ownerToken,
    "GET",
    `/projects/${slug}/lines/v1/endpoints/orders`,
  );
  expect(saved.body.targets[0]?.retry).toEqual({ maxAttempts: 3, initialIntervalSeconds: 2 });
}, 120_000);

test("a request's page names the targets whose filters skipped it", async () => {
  const target = await targetServer();
  closeAfter(target.close);
  const paid = { body: { status: "paid" } };
  const p = await projectWithEndpoint([
    { name: "ledger", targetUrl: target.url },
    { name: "invoices", targetUrl: target.url, filter: paid },
  ]);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", { key: p.key, body: '{"status":"pending"}' })
  ).json();
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);

  await page.goto(`/panel/${p.slug}/requests/${requestId}`);
  await page.getByTestId("request-status").getByText("delivered").waitFor({ timeout: 30_000 });
  expect(await page.getByTestId("request-skipped").textContent()).toBe(
    "invoices — skipped: its filter does not match this call",
  );
  expect(await page.getByRole("heading", { name: "invoices" }).count()).toBe(0);
  expect(target.received).toHaveLength(1);

  // A call every target skips is logged as skipped: found by that status, with nothing to replay.
  await api(p.ownerToken, "POST", `${p.base}/lines/v1/endpoints`, {
    path: "paid",
    targets: [{ name: "invoices", targetUrl: target.url, filter: paid }],
  });
  let skippedId = "";
  await eventually(async () => {
    const answer = await relay(p.slug, "/v1/paid", { key: p.key, body: '{"status":"pending"}' });
    skippedId = answer.status === 200 ? answer.json().requestId : "";
    return skippedId !== "";
  });
  await openSection(page, "Request log");
  await page.getByLabel("Status", { exact: true }).selectOption({ label: "skipped" });
  await page.getByRole("button", { name: "Apply filters" }).click();
  // The unfiltered list stays shown (the skipped call in it) until the filtered one arrives.
  const listed = () =>
    page
      .locator("[data-request-id]")
      .evaluateAll((rows) => rows.map((r) => `${r.dataset.requestId} ${r.dataset.status}`));
  await eventually(async () => (await listed()).join() === `${skippedId} skipped`);
  await page.getByRole("link", { name: skippedId }).click();
  await page.getByText("None: every target skipped this call.").waitFor();
  expect(await page.getByRole("button", { name: "Replay", exact: true }).count()).toBe(0);
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
