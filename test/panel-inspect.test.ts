/**
 * The panel's inspectable requests, in Debian's Chromium against the real stack: a request's
 * headers and body as received with each attempt's answer beside it, Replay of a delivered
 * request, Send again with an edited body (refused by the endpoint's schema first), the request
 * log's search fields, and "Try a filter or transformation" on a request as logged. What the
 * worker keeps of a request is written here by hand for the first test
 * (test/inspect-logged.test.ts has the worker write it); the console's requests are kept by the
 * worker itself.
 */
import { afterAll, expect, test } from "vitest";
import { connect } from "../store/db.ts";
import { api, finishedLog, projectWithEndpoint, relay, stack, targetServer } from "./helpers.ts";
import { openSection, panelBrowser, screenshot, signIn } from "./panel-browser.ts";

const { newPage, closeAfter } = panelBrowser();
const sql = connect(stack().databaseUrl, { max: 1 });
afterAll(() => sql.end());

/** As the worker keeps them: the request's headers and body, and each attempt's answer. */
async function keptAsReceived(requestId: string, body: string) {
  await sql`update requests set headers = ${sql.json({
    "content-type": "application/json",
    "x-order": "1",
    "user-agent": "shop/2.1",
  })}, body = ${Buffer.from(body)} where id = ${requestId}`;
  await sql`update attempts set response_headers = ${sql.json({
    "content-type": "application/octet-stream",
    "x-answer": "yes",
  })}, response_body = ${Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00])},
    response_truncated = true
    where request_id = ${requestId}`;
}

test("a request's page shows it as received with each answer beside its attempt, replays it, and sends it again edited", async () => {
  const target = await targetServer();
  closeAfter(target.close);
  const p = await projectWithEndpoint([{ name: "shop", targetUrl: target.url }], {
    schema: { type: "object", required: ["order"], properties: { order: { type: "integer" } } },
  });
  const { requestId } = (
    await relay(p.slug, "/v1/hook", { key: p.key, body: '{"order":1,"items":["tea"]}' })
  ).json();
  await finishedLog(p, requestId);
  await keptAsReceived(requestId, '{"order":1,"items":["tea"]}');
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await page.goto(`/panel/${p.slug}/requests/${requestId}`);

  const received = page.getByRole("region", { name: "Request as received" });
  await received.getByRole("row", { name: "x-order 1" }).waitFor();
  const body = received.locator('[data-body-kind="json"] pre');
  expect(await body.textContent()).toBe('{\n  "order": 1,\n  "items": [\n    "tea"\n  ]\n}');
  const answer = page.getByTestId("attempt-answer");
  await answer.getByRole("row", { name: "x-answer yes" }).waitFor();
  expect(await answer.locator('[data-body-kind="binary"] figcaption').textContent()).toContain(
    "9 bytes, binary",
  );
  expect(await answer.locator('[data-body-kind="binary"] pre').textContent()).toContain(
    "00000000  89 50 4e 47 0d 0a 1a 0a 00",
  );
  await answer.getByText("Truncated at 64 KiB").waitFor();
  await screenshot(page, "panel-request-inspect");

  // Replay: a delivered request goes to its target again.
  await page.getByRole("button", { name: "Replay", exact: true }).click();
  await page.getByText("Replay started").waitFor();
  await page.locator('[data-outcome="delivered"]').nth(1).waitFor({ timeout: 30_000 });
  expect(target.received.map((r) => r.body)).toEqual([
    '{"order":1,"items":["tea"]}',
    '{"order":1,"items":["tea"]}',
  ]);

  // Send again: refused by the endpoint's schema, next to the body; then sent, edited.
  const form = page.getByRole("form", { name: "Send again" });
  const edited = form.getByLabel("Body to send");
  await edited.fill('{"order":"two"}');
  await form.getByRole("button", { name: "Send again" }).click();
  await form.getByText("/order: must be integer").waitFor();
  await edited.fill('{"order":2}');
  await form.getByRole("button", { name: "Send again" }).click();
  await page.waitForURL((url) => !url.pathname.endsWith(requestId));
  await page.getByTestId("request-status").getByText("delivered").waitFor({ timeout: 30_000 });
  expect(target.received.at(-1)?.body).toBe('{"order":2}');
  // The new request links the original (the log keeps the link: its write path).
  const link = page.getByTestId("request-resent-from").getByRole("link", { name: requestId });
  await link.click();
  await page.waitForURL(`**/requests/${requestId}`);
}, 120_000);

test("the request log is searched by target status code and request id, a bad code refused next to its field", async () => {
  const target = await targetServer((r) => ({ status: r.body.includes("refuse") ? 400 : 200 }));
  closeAfter(target.close);
  const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }]);
  const sent = async (body: string) => {
    const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body })).json();
    await finishedLog(p, requestId);
    return requestId as string;
  };
  const [delivered, refused] = [await sent('{"n":1}'), await sent('{"refuse":1}')];
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await openSection(page, "Request log");
  await page.locator(`[data-request-id="${delivered}"]`).waitFor();

  const filters = page.getByRole("form", { name: "Filter requests" });
  const rows = () =>
    page
      .locator("[data-request-id]")
      .evaluateAll((items) => items.map((item) => item.getAttribute("data-request-id")));
  await filters.getByLabel("Target status").fill("400");
  await filters.getByRole("button", { name: "Apply filters" }).click();
  await page.locator(`[data-request-id="${delivered}"]`).waitFor({ state: "detached" });
  expect(await rows()).toEqual([refused]);
  await screenshot(page, "panel-requests-search");

  await filters.getByLabel("Target status").fill("");
  await filters.getByLabel("Request id").fill(delivered);
  await filters.getByRole("button", { name: "Apply filters" }).click();
  await page.locator(`[data-request-id="${refused}"]`).waitFor({ state: "detached" });
  expect(await rows()).toEqual([delivered]);

  await filters.getByLabel("Target status").fill("99");
  await filters.getByRole("button", { name: "Apply filters" }).click();
  await filters.getByText(/expected number to be >=100/).waitFor();
}, 120_000);

test("a request's page tries filters on it as logged: each target's as it is now, then typed ones", async () => {
  const target = await targetServer();
  closeAfter(target.close);
  const p = await projectWithEndpoint([
    { name: "paid-only", targetUrl: target.url, filter: { body: { status: "paid" } } },
    { name: "every-call", targetUrl: target.url },
  ]);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", { key: p.key, body: '{"status":"pending"}' })
  ).json();
  await finishedLog(p, requestId);
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await page.goto(`/panel/${p.slug}/requests/${requestId}`);

  const tryFilter = page.getByRole("region", { name: "Try a filter or transformation" });
  const targets = tryFilter.getByTestId("filter-targets");
  await targets.locator('[data-target="paid-only"]').getByText("skips it").waitFor();
  expect(await targets.locator('[data-target="paid-only"]').textContent()).toBe(
    'paid-only: {"body":{"status":"paid"}} skips it',
  );
  expect(await targets.locator('[data-target="every-call"]').textContent()).toBe(
    "every-call: no filter: every call matches",
  );
  await tryFilter
    .getByText("On this request as logged: filters run here, transformations in the sandbox")
    .waitFor();

  // Prefilled with the first target's filter, which skips this request.
  const typed = tryFilter.getByLabel("Filter to try");
  expect(JSON.parse(await typed.inputValue())).toEqual({ body: { status: "paid" } });
  const verdict = tryFilter.getByTestId("filter-verdict");
  await verdict.getByText("does not match: the target would skip it").waitFor();

  // Tried in the browser only: what is typed never goes to the control plane.
  const sent: string[] = [];
  page.on("request", (request) => sent.push(request.postData() ?? ""));
  await typed.fill('{"body":{"status":"pend');
  await verdict.getByText("not JSON yet").waitFor();
  await typed.fill('{"body":{"status":"pending"}}');
  await verdict.getByText("matches this request").waitFor();
  await typed.fill('{"body":{"amount":{"$gt":true}}}');
  await verdict.getByText("body.amount.$gt: $gt takes a number or a string").waitFor();
  expect(sent.filter((body) => body.includes("amount") || body.includes("pending"))).toEqual([]);
}, 120_000);

/** Wraps the body and marks the call; as the target would be handed it, path and query too. */
const LEDGER = `(request) => ({
  ...request,
  path: request.path + "/ledger",
  headers: { ...request.headers, "x-ledger": "1" },
  body: { entry: request.body, version: request.query.v },
})`;

test("a request's page tries transformations on it as logged: each target's as it is now, then typed ones", async () => {
  const target = await targetServer();
  closeAfter(target.close);
  const paid = { body: { status: "paid" } };
  const targets = [
    { name: "ledger", targetUrl: `${target.url}?v=2` },
    { name: "paid-only", targetUrl: target.url, filter: paid },
    { name: "archive", targetUrl: target.url, filter: { body: { status: "archived" } } },
  ];
  const p = await projectWithEndpoint(targets);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: '{"id":"order-7","status":"pending"}',
      headers: { "x-shop": "north" },
    })
  ).json();
  await finishedLog(p, requestId);
  // As the worker logs a target whose transformation dropped the call (here, archive's filter did).
  await sql`update requests set skipped = (
    select jsonb_agg(case when s->>'targetName' = 'archive'
      then jsonb_set(s, '{reason}', '"transform"') else s end)
    from jsonb_array_elements(skipped) s) where id = ${requestId}`;
  // Transformations set after the call, so none ran on its delivery: the console tries them.
  const [ledger, paidOnly, archive] = targets;
  const saved = await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
    targets: [
      { ...ledger, transform: LEDGER },
      { ...paidOnly, transform: "(request) => request" },
      { ...archive, filter: undefined, transform: "(request) => null" },
    ],
  });
  expect(saved.status).toBe(200);
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await page.goto(`/panel/${p.slug}/requests/${requestId}`);

  const skipped = page.getByTestId("request-skipped").locator("li");
  await skipped.first().waitFor();
  expect(await skipped.allTextContents()).toEqual([
    "paid-only — skipped: its filter does not match this call",
    "archive — skipped: its transformation dropped the call",
  ]);
  const tryConsole = page.getByRole("region", { name: "Try a filter or transformation" });
  const row = (name: string) =>
    tryConsole.getByTestId("filter-targets").locator(`[data-target="${name}"]`);
  const sent = row("ledger").getByTestId("transformed-request");
  await sent.waitFor();
  expect(JSON.parse((await sent.textContent()) ?? "")).toMatchObject({
    path: "/in/ledger",
    query: { v: "2" },
    headers: { "x-shop": "north", "x-ledger": "1", "content-type": "application/json" },
    body: { entry: { id: "order-7", status: "pending" }, version: "2" },
  });
  await row("paid-only").getByText("not run: its filter skips this call").waitFor();
  await row("archive").getByText("dropped: it returns null").waitFor();
  await screenshot(page, "panel-transform-console");

  // Typed: prefilled with the first target's transformation, tried in the control plane.
  const typed = tryConsole.getByLabel("Transformation to try");
  expect(await typed.inputValue()).toBe(LEDGER);
  const verdict = tryConsole.getByTestId("transform-verdict");
  await verdict.getByTestId("transformed-request").waitFor();
  await typed.fill('(r) => { throw new Error("nope") }');
  await verdict.getByText("fails: it threw Error: nope").waitFor();
  await typed.fill("(r) => ({ ...r, body: r.path })");
  await tryConsole.getByLabel("As handed to").selectOption({ label: "archive" });
  await verdict.getByText('"body": "/in"').waitFor();
  await typed.fill(`(r) => r /* ${"x".repeat(33 * 1024)} */`);
  await verdict.getByText("a transformation is at most 32768 bytes").waitFor();
}, 120_000);
