/**
 * Schedules in the panel, in Debian's Chromium against the real stack: a schedule made from the
 * form fires when asked, its row showing the fire's status and request; a bad cron is named at
 * its field; a paused one says so.
 */
import { expect, test } from "vitest";
import { api, projectWithEndpoint, targetServer } from "./helpers.ts";
import {
  expectEveryControlLabelled,
  openSection,
  panelBrowser,
  screenshot,
  signIn,
} from "./panel-browser.ts";

const { newPage, closeAfter } = panelBrowser();

test("a schedule made in the panel fires now, is paused, and a bad cron is named", async () => {
  const target = await targetServer();
  closeAfter(target.close);
  const p = await projectWithEndpoint([{ name: "reports", targetUrl: target.url }]);
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await openSection(page, "Schedules");

  await page.getByLabel("Endpoint").fill("v1/hook");
  await page.getByLabel("Cron").fill("* * *");
  await page.getByRole("button", { name: "Create schedule" }).click();
  await page.getByText("must have five fields").first().waitFor();

  await page.getByLabel("Cron").fill("0 9 * * 1-5");
  await page.getByLabel("Time zone").fill("Europe/Paris");
  await page.getByLabel("Note").fill("weekday report");
  await page.getByLabel("Body").fill('{"report": "daily"}');
  await page.getByRole("button", { name: "Create schedule" }).click();
  await page.getByRole("cell", { name: "v1/hook · weekday report" }).waitFor();

  await page.getByRole("button", { name: /^Fire sch_/ }).click();
  // The table shows the fire once it is read again.
  await expect.poll(() => target.received.length, { timeout: 15_000 }).toBe(1);
  expect(JSON.parse(target.received[0]?.body ?? "")).toEqual({ report: "daily" });
  await page.reload();
  await page.getByRole("link", { name: "request", exact: true }).waitFor();
  await page.getByText("· 202").waitFor();
  await expectEveryControlLabelled(page);
  await screenshot(page, "panel-schedules");

  await page.getByRole("button", { name: /^Pause sch_/ }).click();
  await page.getByRole("cell").getByText("paused", { exact: true }).waitFor();
  const { body } = await api<{ schedules: { paused: boolean; fires: number }[] }>(
    p.ownerToken,
    "GET",
    `${p.base}/schedules`,
  );
  expect(body.schedules).toMatchObject([{ paused: true, fires: 1 }]);
}, 120_000);
