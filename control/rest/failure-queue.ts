/**
 * The Failure queue routes (failures and their replay): each REST contract beside the operation it
 * calls, as control/connect/failure-queue.ts serves the same operations over Connect.
 */
import * as failures from "../api/failures.ts";
import * as replay from "../api/replay.ts";
import * as answers from "../api/request-answers.ts";
import * as requests from "../api/requests.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const failureQueueRoutes: Route[] = tagged("Failure queue", [
  route(
    "GET",
    `${base}/failures`,
    {
      operationId: "listFailures",
      summary: "Failed and partially failed requests, newest first",
      access: "editor",
      query: requests.listRequestsQuery,
      answer: answers.requestPage,
    },
    ({ ctx, params, query }) => failures.listFailures(ctx, p(params).project, query),
  ),
  route(
    "POST",
    `${base}/failures/replay`,
    {
      operationId: "replayFailures",
      summary:
        "Replay every failure that matches: a recovery job, read at /recoveries/{recoveryId}",
      access: "editor",
      body: failures.replayFailuresBody,
      example: { status: "failed", endpoint: "v1/orders" },
      answer: answers.recovery,
      status: 202,
      errors: ["limit_exceeded", "insufficient_credits"],
    },
    ({ ctx, params, body }) => failures.replayFailures(ctx, p(params).project, body),
  ),
  route(
    "POST",
    `${base}/requests/:requestId/replay`,
    {
      operationId: "replayRequest",
      summary:
        "A new attempt series for a finished request: to the targets that did not get it, or to all of them when every target got it",
      access: "editor",
      answer: answers.request,
      status: 202,
      errors: ["conflict"],
    },
    ({ ctx, params }) => replay.replayRequest(ctx, p(params).project, p(params).requestId),
  ),
]);
