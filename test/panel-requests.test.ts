/**
 * The panel's requests, in Debian's Chromium against the real stack: a refused delivery in the
 * failure queue and its replay, and a waiting request leading to its endpoint's open circuit.
 */
import { expect, test } from "vitest";
import { api, eventually, projectWithEndpoint, relay, targetServer } from "./helpers.ts";
import { openSection, panelBrowser, screenshot, signIn } from "./panel-browser.ts";

const { newPage, closeAfter } = panelBrowser();

test("a delivery the target refuses shows in the failure queue, and a replay delivers it", async () => {
  const state = { healed: false };
  const target = await targetServer(() => ({ status: state.healed ? 200 : 400 }));
  closeAfter(target.close);
  const p = await projectWithEndpoint([{ name: "picky", targetUrl: target.url }]);
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":1}' })).json();
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);

  await openSection(page, "Failure queue");
  await page.locator(`[data-request-id="${requestId}"][data-status="failed"]`).waitFor();
  await page.getByRole("link", { name: requestId }).click();
  await page.locator('[data-outcome="failed"]').getByText("HTTP 400").waitFor();

  state.healed = true;
  await page.getByRole("button", { name: "Replay", exact: true }).click();
  await page.getByTestId("request-status").getByText("delivered").waitFor({ timeout: 30_000 });
  const steps = await page
    .locator("[data-outcome]")
    .evaluateAll((items) => items.map((item) => item.getAttribute("data-outcome")));
  expect(steps).toEqual(["failed", "delivered"]);
  expect(target.received).toHaveLength(2);
  await screenshot(page, "panel-request");

  // A second failure, replayed from the queue with "Replay all".
  state.healed = false;
  const second = (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":2}' })).json();
  await openSection(page, "Failure queue");
  await page.locator(`[data-request-id="${second.requestId}"]`).waitFor({ timeout: 30_000 });
  await screenshot(page, "panel-failures");
  state.healed = true;
  await page.getByRole("button", { name: "Replay all" }).click();
  await page.getByRole("button", { name: "Yes, replay all" }).click();
  await page.getByText("Replaying 1 request.").waitFor();
  await page.getByText("No requests match.").waitFor({ timeout: 30_000 });
}, 120_000);

test("a waiting request leads to its endpoint's open circuit, where a member pauses and resumes the target", async () => {
  const target = await targetServer(() => ({ status: 503 }));
  closeAfter(target.close);
  const p = await projectWithEndpoint([{ name: "t", targetUrl: target.url }], {
    circuitBreaker: { failureThreshold: 1 },
  });
  const circuit = async () =>
    (
      await api<{ targets: { state: string; paused: boolean }[] }>(
        p.ownerToken,
        "GET",
        `${p.base}/lines/v1/endpoints/hook/circuits`,
      )
    ).body.targets[0];
  await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":1}' });
  await eventually(async () => (await circuit())?.state === "open");
  // Sent once the circuit is open: it waits, with no attempt.
  const { requestId } = (await relay(p.slug, "/v1/hook", { key: p.key, body: '{"n":2}' })).json();
  const page = await newPage();
  await signIn(page, p.ownerToken);
  await page.waitForURL(`**/panel/${p.slug}`);

  await page.goto(`/panel/${p.slug}/requests/${requestId}`);
  const waiting = page.getByTestId("request-waiting");
  await waiting.getByText("its circuit is open").waitFor();
  await waiting.getByRole("link", { name: "delivery control" }).click();
  await page.waitForURL(`**/panel/${p.slug}/endpoints/v1/hook`);
  const row = page.locator('[data-target="t"]');
  await row.getByTestId("circuit-state").getByText("open").waitFor();
  await row.getByText(/^opened · /).waitFor();

  await row.getByRole("button", { name: "Pause t" }).click();
  await row.getByTestId("circuit-paused").getByText("paused").waitFor();
  expect(await circuit()).toMatchObject({ state: "open", paused: true });
  await screenshot(page, "panel-delivery-control");
  await row.getByRole("button", { name: "Resume t" }).click();
  await row.getByTestId("circuit-paused").getByText("no").waitFor();
  expect(await circuit()).toMatchObject({ state: "open", paused: false });
  await row.getByText(/^resumed · /).waitFor();
}, 120_000);
