/**
 * The sweep of accepted starts (store/accepted-starts.ts): a start its edge did not confirm in
 * time (the edge died after the 202, Temporal was down) is made here, through Temporal's HTTP
 * API as the edge would have made it, and then forgotten. Made twice is made once: the start
 * carries its workflow id as Temporal's request id, and here it refuses to start a workflow of
 * that id anew once one ran (a 409 means the edge's start did land).
 */
import { claimDueStarts, forgetStarts } from "../store/accepted-starts.ts";
import type { Sql } from "../store/db.ts";

export interface SweepOptions {
  sql: Sql;
  /** Temporal's HTTP API: base URL, namespace and API key (the edge's). */
  temporal: { baseUrl: string; namespace: string; apiKey?: string | undefined };
  fetch: typeof fetch;
  logError: (fields: Record<string, unknown>, message: string) => void;
}

/** Starts one sweep makes at most; the rest wait for the next. */
const SWEEP_STARTS = 64;
/** How often the sweep looks, in milliseconds. */
export const SWEEP_EVERY_MS = 2000;

/** One sweep: the due starts made; answers how many it made or found made. */
export async function sweepAcceptedStarts(options: SweepOptions): Promise<number> {
  const due = await claimDueStarts(options.sql, SWEEP_STARTS);
  const { baseUrl, namespace, apiKey } = options.temporal;
  const workflows = `${baseUrl}/api/v1/namespaces/${encodeURIComponent(namespace)}/workflows`;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (apiKey) headers.authorization = `Bearer ${apiKey}`;
  const made = await Promise.all(
    due.map(async ({ workflowId, start }) => {
      const body = {
        ...JSON.parse(new TextDecoder().decode(start)),
        workflowIdReusePolicy: "WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE",
      };
      const url = `${workflows}/${encodeURIComponent(workflowId)}?noPayloadShorthand`;
      const answer = await options
        .fetch(url, { method: "POST", headers, body: JSON.stringify(body) })
        .catch((error: unknown) => error as Error);
      if (answer instanceof Error || !(answer.ok || answer.status === 409)) {
        const why = answer instanceof Error ? answer.message : `${answer.status}`;
        options.logError({ workflowId, why }, "an accepted start could not be made; tried again");
        if (!(answer instanceof Error)) await answer.body?.cancel();
        return null;
      }
      await answer.body?.cancel();
      return workflowId;
    }),
  );
  const ids = made.filter((id) => id !== null);
  await forgetStarts(options.sql, ids);
  return ids.length;
}

/** Sweeps every SWEEP_EVERY_MS until stopped; a failed sweep is logged and the next goes on. */
export function startAcceptedSweep(options: SweepOptions): { stop(): void } {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    sweepAcceptedStarts(options)
      .catch((err: unknown) => options.logError({ err }, "the sweep of accepted starts failed"))
      .finally(() => {
        running = false;
      });
  }, SWEEP_EVERY_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
