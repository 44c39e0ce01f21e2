/**
 * Section (b)'s baseline: how fast the Temporal SDK client alone starts the edge's own delivery
 * workflow, with the same input size, at the same concurrency as the edge's 202s.
 */
import { Client, Connection } from "@temporalio/client";
import type { DeliveryInput } from "../core/delivery.ts";
import { DELIVERY_WORKFLOW, TASK_QUEUE } from "../core/temporal.ts";
import { connect } from "../store/db.ts";
import { percentile } from "./harness.ts";

/** Starts of the edge's own workflow, with the same input size, straight from the SDK client. */
export async function rawStartRate(
  stack: { databaseUrl: string; temporal: { address: string } },
  project: string,
  targetPort: number,
  concurrency: number,
  durationS: number,
) {
  // The endpoint's real target: a worker reads each attempt's target by its id.
  const sql = connect(stack.databaseUrl, { max: 1 });
  const [target] = await sql<{ id: string }[]>`
    select t.id from targets t join endpoints e on e.id = t.endpoint_id
      join projects p on p.id = e.project_id
    where p.slug = ${project} and e.path = 'async' limit 1`;
  await sql.end();
  const connection = await Connection.connect({ address: stack.temporal.address });
  const client = new Client({ connection });
  const input = (requestId: string): DeliveryInput => ({
    requestId,
    project,
    line: "v1",
    endpoint: "async",
    keyMode: "live",
    receivedAt: new Date().toISOString(),
    headers: { "content-type": "application/json" },
    bodyBase64: btoa('{"bench":true}'),
    bodyBytes: 14,
    targets: [
      {
        id: target?.id ?? "",
        name: "raw",
        targetUrl: `http://127.0.0.1:${targetPort}/sink`,
        deliveryMode: "async",
        timeoutSeconds: 30,
        headers: {},
      },
    ],
  });
  const latencies: number[] = [];
  const deadline = Date.now() + durationS * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < deadline) {
        const id = `raw_${process.pid}_${n++}`;
        const t = performance.now();
        await client.workflow.start(DELIVERY_WORKFLOW, {
          taskQueue: TASK_QUEUE,
          workflowId: id,
          args: [input(id)],
        });
        latencies.push(performance.now() - t);
      }
    }),
  );
  await connection.close();
  return {
    startsPerSecond: latencies.length / durationS,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
  };
}
