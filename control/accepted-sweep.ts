/**
 * The sweep of accepted starts (store/accepted-starts.ts): a start its edge did not confirm in
 * time (the edge died after the 202, Temporal was down) is made here, through Temporal's HTTP
 * API as the edge would have made it, and then forgotten. Made twice is made once: the start
 * carries its workflow id as Temporal's request id, and here it refuses to start a workflow of
 * that id anew once one ran (a 409 means the edge's start did land). Temporal unreachable or
 * refusing for now: the start is due again after its claim.
 */
import { claimDueStarts, forgetStarts } from "../store/accepted-starts.ts";
import type { Sql } from "../store/db.ts";
import { startSweep } from "./sweeps.ts";

export interface SweepOptions {
  sql: Sql;
  /** Temporal's HTTP API: base URL, namespace and API key (the edge's). */
  temporal: { baseUrl: string; namespace: string; apiKey?: string | undefined };
  fetch: typeof fetch;
  logError: (fields: Record<string, unknown>, message: string) => void;
}

/** Starts one sweep makes at most; the rest wait for the next. */
const SWEEP_STARTS = 64;
/** How long one start may take: under its claim (store/accepted-starts.ts), so none overlap. */
const START_TIMEOUT_MS = 4000;
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
        .fetch(url, {
          method: "POST",
          headers,
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(START_TIMEOUT_MS),
        })
        .catch((error: unknown) => error as Error);
      if (answer instanceof Error) {
        options.logError({ workflowId, why: answer.message }, "an accepted start failed; retried");
        return null;
      }
      const text = await answer.text().catch(() => "");
      if (answer.ok || answer.status === 409) return workflowId;
      const why = `${answer.status} ${text.slice(0, 300)}`;
      // A start Temporal finds malformed never passes; a refused credential, busy or failing
      // server (401, 403, 429, 5xx) may, once it is put right.
      if (answer.status === 400) {
        options.logError({ workflowId, why }, "an accepted start was refused for good; forgotten");
        return workflowId;
      }
      options.logError({ workflowId, why }, "an accepted start failed; retried");
      return null;
    }),
  );
  const ids = made.filter((id) => id !== null);
  await forgetStarts(options.sql, ids);
  return ids.length;
}

/** Sweeps every SWEEP_EVERY_MS until stopped (./sweeps.ts). */
export function startAcceptedSweep(options: SweepOptions): { stop(): void } {
  return startSweep(
    SWEEP_EVERY_MS,
    () => sweepAcceptedStarts(options),
    (err) => options.logError({ err }, "the sweep of accepted starts failed"),
  );
}
