/**
 * What bench/scale-faults.ts sends: the kinds of call a sender makes, and the target that counts
 * what reached it.
 */
import { createServer } from "node:http";

/**
 * The kinds of call, by the call's number modulo their count: the endpoint, its targets' paths
 * under the target's /in, the headers and the body. Ordered calls spread over 50 keys; the
 * "flaky" target answers the first attempt of one delivery in four 503 (retried, in its batch
 * or alone; every one failing would keep its circuit opening, its deliveries held).
 */
export const MIX = [
  { name: "plain", endpoint: "in", targets: ["in"] },
  { name: "fan-out", endpoint: "fan", targets: ["fan-a", "fan-b", "fan-c"] },
  {
    name: "ordered",
    endpoint: "ordered",
    targets: ["ordered"],
    headers: (i: number) => ({ "relay-ordering-key": `k${i % 50}` }),
  },
  { name: "32 KiB", endpoint: "in", targets: ["in"], pad: 32 * 1024 },
  { name: "delayed", endpoint: "in", targets: ["in"], headers: () => ({ "relay-delay": "2s" }) },
  { name: "flaky", endpoint: "flaky", targets: ["flaky"] },
] as const satisfies {
  name: string;
  endpoint: string;
  targets: readonly string[];
  headers?: (i: number) => Record<string, string>;
  pad?: number;
}[];
export const kindOf = (i: number) => MIX[i % MIX.length] as (typeof MIX)[number];

export interface MadeAgain {
  requestId: string;
  target: string;
  at: number;
}

/**
 * The customer's side: every delivery to the targets under /in, counted by delivery id, and the
 * targets each request reached.
 */
export function mixTarget() {
  const deliveries = new Map<string, number>();
  const reached = new Map<string, Set<string>>();
  /** Deliveries made again: their request, target and when (ms since the epoch). */
  const again: MadeAgain[] = [];
  /** Each target's last first delivery (ms since the epoch): which kind the drain waited for. */
  const lastFirst = new Map<string, number>();
  /** Deliveries to the flaky target seen, and those answered 503 once already. */
  let flakySeen = 0;
  const failedOnce = new Set<string>();
  const server = createServer((req, res) => {
    req.resume();
    if (req.url?.startsWith("/in/")) {
      const id = String(req.headers["x-relay-delivery-id"]);
      const first = req.url === "/in/flaky" && !failedOnce.has(id) && !deliveries.has(id);
      if (first && flakySeen++ % 4 === 0) {
        failedOnce.add(id);
        res.statusCode = 503;
        res.end("{}");
        return;
      }
      const before = deliveries.get(id) ?? 0;
      deliveries.set(id, before + 1);
      const target = req.url.slice("/in/".length);
      const requestId = String(req.headers["x-relay-request-id"]);
      if (before > 0) again.push({ requestId, target, at: Date.now() });
      else lastFirst.set(target, Date.now());
      const targets = reached.get(requestId) ?? new Set<string>();
      reached.set(requestId, targets.add(target));
    }
    res.end("{}");
  });
  return { server, deliveries, reached, again, lastFirst };
}
