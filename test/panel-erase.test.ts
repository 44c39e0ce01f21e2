/**
 * Erasing in the panel, in Debian's Chromium against the real stack: a finished request's content
 * erased from its page (confirmed first), after which it offers neither replay nor send again;
 * the Retention page, where an owner sets how many days content is kept, within the plan; and
 * deleting the whole project there.
 */
import { expect, test } from "vitest";
import { api, finishedLog, projectWithEndpoint, relay, targetServer } from "./helpers.ts";
import {
  expectEveryControlLabelled,
  openSection,
  panelBrowser,
  screenshot,
  signIn,
} from "./panel-browser.ts";

const { newPage, closeAfter } = panelBrowser();

test("a request's content is erased from its page, and an owner sets the project's retention", async () => {
  const target = await targetServer();
  closeAfter(target.close);
  const p = await projectWithEndpoint([{ name: "shop", targetUrl: target.url }]);
  const { requestId } = (
    await relay(p.slug, "/v1/hook", { key: p.key, body: '{"email":"someone@example.com"}' })
  ).json();
  await finishedLog(p, requestId);
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await page.goto(`/panel/${p.slug}/requests/${requestId}`);

  const received = page.getByRole("region", { name: "Request as received" });
  await received.getByText("someone@example.com").waitFor();
  await received.getByRole("button", { name: "Erase content" }).click();
  await received.getByRole("button", { name: "Erase for good" }).click();
  await received.getByTestId("request-erased").waitFor();
  expect(await received.getByText("someone@example.com").count()).toBe(0);
  expect(await page.getByRole("button", { name: "Replay" }).count()).toBe(0);
  expect(await page.getByRole("button", { name: /Send again/ }).count()).toBe(0);
  await screenshot(page, "panel-erased");
  const log = await api<{ contentErasedAt: string | null; body: unknown }>(
    p.ownerToken,
    "GET",
    `${p.base}/requests/${requestId}`,
  );
  expect(log.body.contentErasedAt).not.toBeNull();
  expect(log.body.body).toBeNull();

  await openSection(page, "Retention");
  const days = page.getByLabel("Keep headers, bodies and answers (days)");
  await days.fill("400");
  await page.getByRole("button", { name: "Save retention" }).click();
  await page.getByText("a project keeps content at most 365 days").waitFor();
  await days.fill("7");
  await page.getByRole("button", { name: "Save retention" }).click();
  await page.getByRole("status").getByText("Saved.").waitFor();
  await expectEveryControlLabelled(page);
  await screenshot(page, "panel-retention");
  const retention = await api(p.ownerToken, "GET", `${p.base}/retention`);
  expect(retention.body).toEqual({ retentionDays: 7, maxRetentionDays: 365 });
}, 120_000);

test("an owner deletes the project from the Retention page, its slug typed and asked twice", async () => {
  const p = await projectWithEndpoint([{ name: "shop", targetUrl: "http://127.0.0.1:9/in" }]);
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);
  await openSection(page, "Retention");
  const remove = page.getByRole("button", { name: "Delete project" });
  expect(await remove.isDisabled()).toBe(true);
  await page.getByLabel(`Type ${p.slug} to confirm`).fill(p.slug);
  await expectEveryControlLabelled(page);
  await remove.click();
  await screenshot(page, "panel-delete-project");
  await page.getByRole("button", { name: "Yes, delete it" }).click();
  // The session ends with the project: the sign-in form is back.
  await page.getByRole("button", { name: "Sign in" }).waitFor();
  expect((await api(p.ownerToken, "GET", p.base)).status).toBe(401);
}, 60_000);
