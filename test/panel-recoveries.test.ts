/**
 * Recovery jobs in the panel, in Debian's Chromium against the real stack: a dry run says how
 * many failures would replay and their cost; the job started from it shows its progress as a
 * bar while it runs, and its Cancel stops it.
 */
import { expect, test } from "vitest";
import { api, eventually, projectWithEndpoint, relay, targetServer } from "./helpers.ts";
import {
  expectEveryControlLabelled,
  openSection,
  panelBrowser,
  screenshot,
  signIn,
} from "./panel-browser.ts";

const { newPage, closeAfter } = panelBrowser();

test("a dry run, then a recovery job with its progress bar, cancelled mid-way", async () => {
  let healed = false;
  const target = await targetServer(() => ({ status: healed ? 200 : 400 }));
  closeAfter(target.close);
  const p = await projectWithEndpoint([{ name: "shop", targetUrl: target.url }]);
  for (let i = 0; i < 12; i++) {
    expect((await relay(p.slug, "/v1/hook", { key: p.key, body: `{"n":${i}}` })).status).toBe(202);
  }
  const failures = () => api<{ requests: unknown[] }>(p.ownerToken, "GET", `${p.base}/failures`);
  await eventually(async () => (await failures()).body.requests.length === 12);
  healed = true;
  // Two a second: the job runs long enough to be seen and cancelled.
  const limited = await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
    targets: [{ name: "shop", targetUrl: target.url, maxDeliveriesPerSecond: 2 }],
  });
  expect(limited.status).toBe(200);

  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await openSection(page, "Recovery jobs");
  await page.getByLabel("Endpoint").fill("v1/hook");
  await page.getByRole("button", { name: "Dry run" }).click();
  await page.getByText("12 requests would be replayed, for 12 credits.").waitFor();
  await page.getByRole("button", { name: "Start recovery" }).click();
  await page.getByRole("button", { name: "Yes, start it" }).click();

  const bar = page.getByRole("progressbar");
  await eventually(async () => Number(await bar.getAttribute("value")) >= 2);
  await expectEveryControlLabelled(page);
  await screenshot(page, "panel-recoveries");
  await page.getByRole("button", { name: /^Cancel rec_/ }).click();
  await page.getByRole("cell").getByText("cancelled", { exact: true }).waitFor();
  const { body } = await api<{ recoveries: { state: string; sent: number }[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/recoveries`,
  );
  expect(body.recoveries).toHaveLength(1);
  expect(body.recoveries[0]?.state).toBe("cancelled");
  expect(body.recoveries[0]?.sent).toBeLessThan(12);
}, 120_000);
