/**
 * Starts delivery workflows through Temporal's HTTP API with plain `fetch`, so the edge runs on
 * any web-standard runtime (grpc-js under Deno's Node layer is not reliable).
 */
import type { DeliveryInput } from "../core/delivery.ts";
import { RelayError } from "../core/errors.ts";
import { DELIVERY_WORKFLOW, searchAttributes, TASK_QUEUE } from "../core/temporal.ts";

export interface WorkflowStarter {
  startDelivery(input: DeliveryInput): Promise<void>;
}

export interface TemporalHttpOptions {
  baseUrl: string;
  namespace: string;
  apiKey?: string | undefined;
  fetch: typeof fetch;
}

export function temporalHttpStarter(options: TemporalHttpOptions): WorkflowStarter {
  const namespace = encodeURIComponent(options.namespace);
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (options.apiKey) headers.authorization = `Bearer ${options.apiKey}`;
  return {
    async startDelivery(input) {
      const url = `${options.baseUrl}/api/v1/namespaces/${namespace}/workflows/${encodeURIComponent(input.requestId)}`;
      const response = await options
        .fetch(url, {
          method: "POST",
          headers,
          body: JSON.stringify({
            workflowType: { name: DELIVERY_WORKFLOW },
            taskQueue: { name: TASK_QUEUE },
            // Temporal deduplicates starts by requestId, so retrying this call is safe.
            requestId: input.requestId,
            input: [input],
            searchAttributes: {
              indexedFields: {
                [searchAttributes.project]: input.project,
                [searchAttributes.line]: input.line,
                [searchAttributes.endpoint]: input.endpoint,
                [searchAttributes.status]: "queued",
              },
            },
          }),
        })
        .catch(() => null);
      if (!response?.ok) {
        await response?.body?.cancel();
        throw new RelayError("unavailable", "the request could not be queued; try again");
      }
      await response.body?.cancel();
    },
  };
}
