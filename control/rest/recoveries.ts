/**
 * The Recovery jobs routes: a replay of many requests by filter, dry run or job, read and
 * cancelled; each REST contract beside the operation it calls, as control/connect/recoveries.ts
 * serves the same operations over Connect.
 */

import * as recoveries from "../api/recoveries.ts";
import * as answers from "../api/request-answers.ts";
import { base, OtherAnswer, p, type Route, route, tagged } from "./contract.ts";

export const recoveryRoutes: Route[] = tagged("Recovery jobs", [
  route(
    "POST",
    `${base}/recoveries`,
    {
      operationId: "startRecovery",
      summary: "Replay every finished request that matches, as a job; or say what it would do",
      description:
        "Failed and partially failed requests unless `status` says otherwise, received before the job starts. Each replay is a delivery like a member's: it holds and is charged credits, takes its place under the caps and keeps each target's flow control.",
      access: "editor",
      body: recoveries.recoveryBody,
      example: { endpoint: "v1/orders", since: "2026-12-01T00:00:00Z", dryRun: true },
      answer: answers.recovery,
      status: 202,
      other: { status: 200, answer: answers.recoveryPlan, when: "a dry run's plan" },
      errors: ["conflict", "limit_exceeded", "insufficient_credits"],
    },
    async ({ ctx, params, body }) => {
      const started = await recoveries.startRecovery(ctx, p(params).project, body);
      return "recoveryId" in started ? started : new OtherAnswer(started);
    },
  ),
  route(
    "GET",
    `${base}/recoveries`,
    {
      operationId: "listRecoveries",
      summary: "The project's recovery jobs, newest first (the last 50)",
      access: "editor",
      answer: answers.recoveryList,
    },
    ({ ctx, params }) => recoveries.listRecoveries(ctx, p(params).project),
  ),
  route(
    "GET",
    `${base}/recoveries/:recoveryId`,
    {
      operationId: "getRecovery",
      summary: "A recovery job's progress",
      access: "editor",
      answer: answers.recovery,
    },
    ({ ctx, params }) => recoveries.getRecovery(ctx, p(params).project, p(params).recoveryId),
  ),
  route(
    "DELETE",
    `${base}/recoveries/:recoveryId`,
    {
      operationId: "cancelRecovery",
      summary:
        "Cancel a running job: no replay starts from now on, and those under way are cancelled; one that ended answers as it stands",
      access: "editor",
      answer: answers.recovery,
    },
    ({ ctx, params }) => recoveries.cancelRecovery(ctx, p(params).project, p(params).recoveryId),
  ),
]);
