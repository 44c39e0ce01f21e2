/**
 * What the panel's test files share: Debian's Chromium driven by playwright-core, a fresh
 * browser profile's page for each member, signing in, the project's navigation, and the
 * screenshots `RELAY_SCREENSHOTS=1` writes to docs/ (docs/panel.md shows them).
 */
import { mkdir } from "node:fs/promises";
import { type Browser, type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, expect } from "vitest";
import { stack } from "./helpers.ts";

/**
 * Starts the browser before the calling file's tests and closes it, its pages and what was
 * handed to `closeAfter` (target servers) after them.
 */
export function panelBrowser() {
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

  return {
    newPage,
    closeAfter: (close: () => Promise<void>) => {
      closers.push(close);
    },
  };
}

export async function screenshot(page: Page, name: string) {
  if (!process.env.RELAY_SCREENSHOTS) return;
  await mkdir("docs", { recursive: true });
  await page.screenshot({ path: `docs/${name}.png`, fullPage: true });
}

export async function signIn(page: Page, token: string) {
  await page.goto("/");
  await page.getByLabel("Member token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/** A section of the project, from the navigation every project page has. */
export function openSection(page: Page, name: string) {
  return page.getByRole("navigation", { name: "Project" }).getByRole("link", { name }).click();
}

/** Every form control on the page has a label a screen reader announces with it. */
export async function expectEveryControlLabelled(page: Page) {
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll("input, select, textarea")]
      .filter((el) => (el as HTMLInputElement).labels?.length === 0)
      .map((el) => el.outerHTML),
  );
  expect(unlabelled).toEqual([]);
}
