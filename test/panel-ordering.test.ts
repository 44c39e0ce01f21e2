/**
 * Ordered delivery in the panel, in Debian's Chromium against the real stack (issue 28): the
 * endpoint form turns an endpoint's ordering on and off, and the endpoint page says which it is.
 */
import { expect, test } from "vitest";
import { api, projectWithEndpoint } from "./helpers.ts";
import { expectEveryControlLabelled, panelBrowser, screenshot, signIn } from "./panel-browser.ts";

const { newPage } = panelBrowser();

test("an owner makes an endpoint ordered and back; the endpoint page shows its ordering", async () => {
  const p = await projectWithEndpoint([{ name: "orders", targetUrl: "http://127.0.0.1:9/orders" }]);
  const endpointPath = `${p.base}/lines/v1/endpoints/hook`;
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await page.goto(`/panel/${p.slug}/endpoints/v1/hook`);
  await expectEveryControlLabelled(page);
  expect(await page.getByTestId("ordering").textContent()).toMatch(/^Unordered/);

  const fifo = page.getByLabel("Deliver in order (fifo)");
  expect(await fifo.isChecked()).toBe(false);
  await fifo.check();
  await page.getByRole("button", { name: "Save changes" }).click();
  await page.getByRole("status").getByText("Saved.").waitFor();
  expect((await api(p.ownerToken, "GET", endpointPath)).body.ordering).toBe("fifo");
  await page
    .getByTestId("ordering")
    .getByText(/^Ordered \(fifo\)/)
    .waitFor();
  expect(await page.getByLabel("Deliver in order (fifo)").isChecked()).toBe(true);
  await screenshot(page, "panel-ordering");

  await page.getByLabel("Deliver in order (fifo)").uncheck();
  await page.getByRole("button", { name: "Save changes" }).click();
  await page
    .getByTestId("ordering")
    .getByText(/^Unordered/)
    .waitFor();
  expect((await api(p.ownerToken, "GET", endpointPath)).body.ordering).toBe("none");
}, 120_000);
