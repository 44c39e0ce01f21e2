/**
 * A target's flow control and secret headers in the panel, in Debian's Chromium against the real
 * stack (issue 28): the endpoint form edits both limits and the secret headers, refusals appear
 * next to their fields, and the delivery control shows each target's limits beside the
 * deliveries waiting for it, those its flow control holds included.
 */
import { afterAll, expect, test } from "vitest";
import { connect } from "../store/db.ts";
import { api, eventually, projectWithEndpoint, stack } from "./helpers.ts";
import { expectEveryControlLabelled, panelBrowser, screenshot, signIn } from "./panel-browser.ts";

const { newPage } = panelBrowser();
const sql = connect(stack().databaseUrl, { max: 1 });
afterAll(() => sql.end());

test("an owner sets a target's flow limits and secret headers; the endpoint page shows them and what waits", async () => {
  const p = await projectWithEndpoint([
    { name: "orders", targetUrl: "http://127.0.0.1:9/orders" },
    { name: "audit", targetUrl: "http://127.0.0.1:9/audit" },
  ]);
  const endpointPath = `${p.base}/lines/v1/endpoints/hook`;
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await page.goto(`/panel/${p.slug}/endpoints/v1/hook`);
  await expectEveryControlLabelled(page);

  const target = page.getByRole("group", { name: "Target 1" });
  const perSecond = target.getByLabel("Deliveries per second at most");
  const atOnce = target.getByLabel("Deliveries at once at most");
  const save = page.getByRole("button", { name: "Save changes" });
  // The browser knows a fraction is no limit; the API says where 1000 ends.
  await perSecond.fill("2.5");
  await save.click();
  await target.getByText("must be a whole number").waitFor();
  await perSecond.fill("1001");
  await save.click();
  await target.getByText(/less than or equal to 1000|<=1000/).waitFor();
  expect(await perSecond.getAttribute("aria-invalid")).toBe("true");

  await perSecond.fill("20");
  await atOnce.fill("5");
  await target.getByLabel("Secret headers").fill("X-Api-Token\nx-api-token\nX-Signature");
  await save.click();
  await page.getByRole("status").getByText("Saved.").waitFor();
  const saved = await api(p.ownerToken, "GET", endpointPath);
  expect(saved.body.targets).toMatchObject([
    { name: "orders", maxDeliveriesPerSecond: 20, maxConcurrent: 5 },
    { name: "audit" },
  ]);
  const [orders, audit] = saved.body.targets as { id: string; secretHeaders?: string[] }[];
  expect(orders?.secretHeaders).toEqual(["x-api-token", "x-signature"]);
  // The form shows what was saved: lowercase, once each.
  await eventually(
    async () =>
      (await target.getByLabel("Secret headers").inputValue()) === "x-api-token\nx-signature",
  );
  expect(await perSecond.inputValue()).toBe("20");

  // Three deliveries wait for the limited target, as its flow control holds them.
  const row = page.locator('[data-target="orders"]');
  expect(await row.getByTestId("flow-limits").textContent()).toBe("20/s, 5 at once");
  expect(await page.locator('[data-target="audit"]').getByTestId("flow-limits").textContent()).toBe(
    "none",
  );
  const held = ["a", "b", "c"].map((n) => ({ target_id: orders?.id, workflow_id: `req_flow${n}` }));
  await sql`insert into held_deliveries ${sql(held)}`;
  try {
    await page.reload();
    await row.getByTestId("circuit-waiting").getByText("3").waitFor();
    expect(await row.getByTestId("circuit-state").textContent()).toBe("closed");
    await screenshot(page, "panel-flow-control");
  } finally {
    await sql`delete from held_deliveries where target_id = ${orders?.id ?? ""}`;
  }
  expect(audit?.secretHeaders).toBeUndefined();

  // A sync target takes no flow control, so the form offers none for it.
  await target.getByLabel("Delivery mode").selectOption({ label: "sync: answers the caller" });
  expect(await target.getByLabel("Deliveries per second at most").count()).toBe(0);
}, 120_000);
