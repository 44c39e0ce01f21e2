/**
 * Sustained delivery, end to end: `concurrency` callers each POST an async request to the edge
 * and wait until the bench target (bench/target.ts) has received it before sending the next, so
 * nothing piles up between the 202 and the delivery: what this measures is delivered per second
 * with no growing backlog, the figure comparable to the bare ceiling's completed per second
 * (bench/ceiling-runner.ts) with as many starters.
 */
import { Agent, request } from "undici";
import { followReceipts, percentile } from "./harness.ts";

export interface DeliveryLoad {
  edgeUrl: string;
  /** The async endpoint's path on the edge, e.g. /v1/async. */
  path: string;
  host: string;
  auth: string;
  /** The bench target's base URL (its GET /receipts). */
  targetUrl: string;
  concurrency: number;
  seconds: number;
}

export interface DeliveryResult {
  deliveredPerSecond: number;
  /** POST to 202. */
  acceptedP50Ms: number;
  /** POST to the target's receipt. */
  deliveredP50Ms: number;
  deliveredP99Ms: number;
  /** Answers other than 202 (the callers go on). */
  refused: number;
  /** 202s whose delivery did not arrive within `LOST_AFTER_MS`. */
  lost: number;
}

const LOST_AFTER_MS = 60_000;

export async function deliveredPerSecond(load: DeliveryLoad): Promise<DeliveryResult> {
  const waiting = new Map<string, () => void>();
  /** Receipts that came before their 202 was read. */
  const early = new Set<string>();
  const receipts = await followReceipts(load.targetUrl, (id) => {
    const resolve = waiting.get(id);
    if (resolve) resolve();
    else early.add(id);
  });
  const dispatcher = new Agent({ connections: load.concurrency });
  const accepted: number[] = [];
  const delivered: number[] = [];
  let refused = 0;
  let lost = 0;
  const started = performance.now();
  const deadline = started + load.seconds * 1000;
  await Promise.all(
    Array.from({ length: load.concurrency }, async () => {
      while (performance.now() < deadline) {
        const t = performance.now();
        const answer = await request(`${load.edgeUrl}${load.path}`, {
          method: "POST",
          dispatcher,
          headers: {
            host: load.host,
            authorization: load.auth,
            "content-type": "application/json",
          },
          body: '{"bench":true}',
        });
        const body = (await answer.body.json()) as { requestId?: string };
        if (answer.statusCode !== 202 || !body.requestId) {
          refused++;
          continue;
        }
        accepted.push(performance.now() - t);
        const id = body.requestId;
        const arrived =
          early.delete(id) ||
          (await new Promise<boolean>((resolve) => {
            const timer = setTimeout(() => resolve(false), LOST_AFTER_MS);
            waiting.set(id, () => {
              clearTimeout(timer);
              resolve(true);
            });
          }));
        waiting.delete(id);
        if (arrived) delivered.push(performance.now() - t);
        else lost++;
      }
    }),
  );
  const elapsedS = (performance.now() - started) / 1000;
  await receipts.stop();
  await dispatcher.close();
  return {
    deliveredPerSecond: delivered.length / elapsedS,
    acceptedP50Ms: percentile(accepted, 0.5),
    deliveredP50Ms: percentile(delivered, 0.5),
    deliveredP99Ms: percentile(delivered, 0.99),
    refused,
    lost,
  };
}
