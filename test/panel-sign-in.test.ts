/**
 * Signing in to the panel and getting around it, in Debian's Chromium against the real stack: a
 * wrong token, a lost control plane and the admin token each get a clear message, a malformed
 * URL the not-found page, and a member does it all with the keyboard alone.
 */
import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { newProject, stack } from "./helpers.ts";
import { openSection, panelBrowser, screenshot, signIn } from "./panel-browser.ts";

const { newPage } = panelBrowser();

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
