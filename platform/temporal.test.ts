/**
 * A project's history deletion while the namespace runs another batch job: Temporal refuses it
 * (RESOURCE_EXHAUSTED, one job at a time by default) and it is started again once the other ends.
 * The dev server's jobs end before a second DELETE reaches it, so the refusal is Temporal's as its
 * frontend words it (service/frontend/workflow_handler.go), answered by a client of its own.
 */
import { Metadata, status } from "@grpc/grpc-js";
import type { Client } from "@temporalio/client";
import { expect, test } from "vitest";
import { deleteProjectHistories } from "./temporal.ts";

function busyFor(refusals: number) {
  const jobs: string[] = [];
  const client = {
    options: { namespace: "relay" },
    workflowService: {
      async startBatchOperation(request: { jobId: string; visibilityQuery: string }) {
        if (refusals-- > 0) {
          throw Object.assign(new Error("Max concurrent batch operations is reached"), {
            code: status.RESOURCE_EXHAUSTED,
            details: "Max concurrent batch operations is reached",
            metadata: new Metadata(),
          });
        }
        jobs.push(`${request.jobId} ${request.visibilityQuery}`);
      },
    },
  };
  return { client: client as unknown as Client, jobs };
}

test("a deletion refused while another batch job runs is started once it ends", async () => {
  const { client, jobs } = busyFor(2);
  await deleteProjectHistories(client, "acme", "1");
  expect(jobs).toEqual(['delete-project-acme-1 RelayProject = "acme"']);
});

test("any other refusal is the caller's at once", async () => {
  const client = {
    options: { namespace: "relay" },
    workflowService: {
      startBatchOperation: () => Promise.reject(new Error("unavailable")),
    },
  } as unknown as Client;
  await expect(deleteProjectHistories(client, "acme", "1")).rejects.toThrow("unavailable");
});
