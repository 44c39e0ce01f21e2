/**
 * The memory bench's load: a cycle of 20 calls, good and bad, each bad one with a value of its
 * own (key, slug, path), sent at a fixed rate on the clock rather than flat out.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { type Agent, request } from "undici";

/** Past this many calls unanswered, a due call is skipped (and counted), not queued. */
export const MAX_IN_FLIGHT = 256;

export type Kind =
  | "async"
  | "sync"
  | "stream"
  | "wrong key"
  | "unknown project"
  | "bad JSON"
  | "unknown path";

/** One cycle of 20 calls, the bad ones spread between the good. */
export const CYCLE: Kind[] = [
  ...["async", "async", "sync", "async", "wrong key"],
  ...["async", "stream", "async", "async", "unknown project"],
  ...["async", "sync", "async", "async", "bad JSON"],
  ...["async", "stream", "async", "async", "unknown path"],
] as Kind[];

export type Call = ReturnType<typeof callFor>;

/** Answers a call of `kind` (the `n`th) with its status. */
export function callFor(
  edgeUrl: string,
  domain: string,
  slug: string,
  key: string,
  dispatcher: Agent,
) {
  /** A well-formed key no one holds, one per call. */
  const strangerKey = (n: number) => `rk_live_${n.toString(36).padStart(43, "0")}`;
  return async (kind: Kind, n: number): Promise<string> => {
    let host = `${slug}.${domain}`;
    let path = `/v1/${kind}`;
    let authorization = `Bearer ${key}`;
    let body = JSON.stringify({ n });
    switch (kind) {
      case "wrong key":
        path = "/v1/async";
        authorization = `Bearer ${strangerKey(n)}`;
        break;
      case "unknown project":
        host = `nope-${n}.${domain}`;
        path = "/v1/async";
        authorization = `Bearer ${strangerKey(n)}`;
        break;
      case "bad JSON":
        path = "/v1/async";
        body = `{"n":${n},`;
        break;
      case "unknown path":
        path = `/v${n}/missing-${n}`;
        break;
    }
    const answer = await request(`${edgeUrl}${path}`, {
      method: "POST",
      dispatcher,
      headers: { host, authorization, "content-type": "application/json" },
      body,
    });
    await answer.body.dump({ limit: Number.POSITIVE_INFINITY });
    return String(answer.statusCode);
  };
}

/** Calls at `rate` per second, on the clock: a slow answer delays no later call. */
export function steadyLoad(rate: number, send: (n: number) => Promise<void>) {
  let n = 0;
  const inFlight = new Set<Promise<void>>();
  const load = {
    skipped: 0,
    /** Sends for `seconds`, then waits for every answer. */
    async drive(seconds: number): Promise<void> {
      const started = performance.now();
      for (let i = 0; i < seconds * rate; i++) {
        const wait = started + (i * 1000) / rate - performance.now();
        if (wait > 0) await sleep(wait);
        if (inFlight.size >= MAX_IN_FLIGHT) {
          load.skipped++;
          continue;
        }
        const sent: Promise<void> = send(n++).finally(() => inFlight.delete(sent));
        inFlight.add(sent);
      }
      await Promise.all(inFlight);
    },
  };
  return load;
}
