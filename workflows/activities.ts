/**
 * Delivery activities: the I/O of the delivery workflow. Each attempt is logged before its
 * outcome is reported to Temporal, so the request log shows every try, retried or not.
 */
import { ApplicationFailure, Context } from "@temporalio/activity";
import { rotateExpiringKeys } from "../control/api/rotation.ts";
import type { Sql } from "../control/db/client.ts";
import {
  classifyStatus,
  type DeliveryInput,
  type DeliveryTarget,
  retryAfterMs,
} from "../core/delivery.ts";
import type { RequestStatus } from "../core/model.ts";

export interface ActivityDeps {
  sql: Sql;
  fetch: typeof fetch;
  /** Real time plus the dev clock's offset, read from Postgres. */
  now: () => Promise<Date>;
  sealingKey: CryptoKey;
}

export interface DeliverInput {
  requestId: string;
  target: DeliveryTarget;
  headers: Record<string, string>;
  body: string;
}

/** The error type the workflow's retry policy never retries. */
export const TARGET_REJECTED = "TargetRejected";

export function createActivities({ sql, fetch, now, sealingKey }: ActivityDeps) {
  return {
    /** Idempotent: a retried or replayed open leaves the first row as it is. */
    async openRequest(input: Omit<DeliveryInput, "targets" | "headers" | "body">): Promise<void> {
      await sql`
        insert into requests (id, project_id, line_key, endpoint_path, key_mode, status,
          body_bytes, received_at)
        select ${input.requestId}, p.id, ${input.line}, ${input.endpoint}, ${input.keyMode},
          'delivering', ${input.bodyBytes}, ${input.receivedAt}
        from projects p where p.slug = ${input.project}
        on conflict (id) do nothing`;
    },

    async deliver({ requestId, target, headers, body }: DeliverInput): Promise<number> {
      const { attempt } = Context.current().info;
      const startedAt = new Date();
      const started = performance.now();
      let statusCode: number | null = null;
      let retryAfter: string | null = null;
      let error: string | null = null;
      try {
        const response = await fetch(target.targetUrl, {
          method: "POST",
          headers: {
            ...headers,
            ...target.headers,
            "x-relay-request-id": requestId,
            "x-relay-delivery-id": `${requestId}.${target.id}`,
            "x-relay-attempt": String(attempt),
          },
          body,
          signal: AbortSignal.any([
            Context.current().cancellationSignal,
            AbortSignal.timeout(target.timeoutSeconds * 1000),
          ]),
        });
        statusCode = response.status;
        retryAfter = response.headers.get("retry-after");
        await response.body?.cancel();
      } catch (cause) {
        error = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
      }
      const latencyMs = Math.round(performance.now() - started);
      await sql`
        insert into attempts (request_id, target_id, target_name, attempt, started_at,
          status_code, latency_ms, error)
        values (${requestId}, ${target.id}, ${target.name}, ${attempt}, ${startedAt},
          ${statusCode}, ${latencyMs}, ${error})`;

      if (statusCode === null) {
        throw ApplicationFailure.retryable(`target unreachable: ${error}`, "TargetUnreachable");
      }
      const outcome = classifyStatus(statusCode);
      if (outcome === "delivered") return statusCode;
      if (outcome === "failed") {
        throw ApplicationFailure.create({
          message: `target answered ${statusCode}`,
          type: TARGET_REJECTED,
          nonRetryable: true,
        });
      }
      const delay = retryAfterMs(retryAfter, new Date());
      throw ApplicationFailure.create({
        message: `target answered ${statusCode}`,
        type: "TargetRetry",
        ...(delay !== null && { nextRetryDelay: delay }),
      });
    },

    async finishRequest(requestId: string, status: RequestStatus): Promise<void> {
      await sql`update requests set status = ${status}, updated_at = now() where id = ${requestId}`;
    },

    async rotateExpiringKeys(): Promise<number> {
      return rotateExpiringKeys(sql, await now(), sealingKey);
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
