/**
 * A request's completion callbacks on its page, in Debian's Chromium against the real stack:
 * each target's, where it went and how its last try went.
 */
import { expect, test } from "vitest";
import { finishedLog, projectWithEndpoint, relay, targetServer } from "./helpers.ts";
import { panelBrowser, screenshot, signIn } from "./panel-browser.ts";

const { newPage, closeAfter } = panelBrowser();

test("a request's page shows each target's callback and how it went", async () => {
  const target = await targetServer();
  const caller = await targetServer();
  closeAfter(target.close);
  closeAfter(caller.close);
  const p = await projectWithEndpoint([{ name: "billing", targetUrl: target.url }]);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", {
      key: p.key,
      body: '{"order":7}',
      headers: { "relay-callback": caller.url },
    })
  ).json();
  await finishedLog(p, requestId);
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  // The callback goes once the delivery ended: the page shows it once it was sent.
  await expect
    .poll(
      async () => {
        await page.goto(`/panel/${p.slug}/requests/${requestId}`);
        await page.getByRole("heading", { name: "Attempts" }).waitFor();
        return page
          .getByTestId("request-callbacks")
          .textContent({ timeout: 500 })
          .catch(() => "");
      },
      { timeout: 20_000 },
    )
    .toContain("sent (HTTP 200)");
  const told = await page.getByTestId("request-callbacks").textContent();
  expect(told).toContain("billing delivered, told to");
  expect(told).toContain(caller.url);
  expect(told).toContain("1 try");
  await screenshot(page, "panel-callbacks");
}, 120_000);
