/**
 * The Schedules routes: an endpoint's crons, each firing its stored call through the edge; each
 * REST contract beside the operation it calls, as control/connect/schedules.ts serves the same
 * operations over Connect.
 */
import * as answers from "../api/answers.ts";
import * as schedules from "../api/schedules.ts";
import { base, endpointPath, p, type Route, route, tagged } from "./contract.ts";

const schedulePath = `${base}/schedules/:scheduleId`;

export const scheduleRoutes: Route[] = tagged("Schedules", [
  route(
    "POST",
    `${endpointPath}/schedules`,
    {
      operationId: "createSchedule",
      summary: "Give the endpoint a schedule: a cron, and the call each fire sends",
      description:
        "Each fire is a call through the edge's whole pipeline, as a caller's: the endpoint's schema, rate limits, credits (of `mode`'s pool), each target in its mode, the request log. A free project has at most 10 schedules, 5 minutes apart at least; a paid one 1,000, a minute apart.",
      access: "editor",
      body: schedules.createScheduleBody,
      example: { cron: "0 9 * * 1-5", timeZone: "Europe/Paris", body: { report: "daily" } },
      answer: answers.schedule,
      status: 201,
      errors: ["limit_exceeded", "conflict"],
    },
    ({ ctx, params, body }) => {
      const { project, line, path } = p(params);
      return schedules.createSchedule(ctx, project, line, path, body);
    },
  ),
  route(
    "GET",
    `${endpointPath}/schedules`,
    {
      operationId: "listEndpointSchedules",
      summary: "The endpoint's schedules, oldest first, without their calls' bodies and headers",
      access: "editor",
      answer: answers.scheduleList,
    },
    ({ ctx, params }) => {
      const { project, line, path } = p(params);
      return schedules.listSchedules(ctx, project, { line, path });
    },
  ),
  route(
    "GET",
    `${base}/schedules`,
    {
      operationId: "listSchedules",
      summary: "The project's schedules, oldest first, without their calls' bodies and headers",
      access: "editor",
      answer: answers.scheduleList,
    },
    ({ ctx, params }) => schedules.listSchedules(ctx, p(params).project),
  ),
  route(
    "GET",
    schedulePath,
    {
      operationId: "getSchedule",
      summary: "A schedule, its last fire and its next",
      access: "editor",
      answer: answers.schedule,
    },
    ({ ctx, params }) => schedules.getSchedule(ctx, p(params).project, p(params).scheduleId),
  ),
  route(
    "PATCH",
    schedulePath,
    {
      operationId: "updateSchedule",
      summary: "Change a schedule's cron, call or note, or pause and resume it",
      access: "editor",
      body: schedules.updateScheduleBody,
      example: { paused: true },
      answer: answers.schedule,
    },
    ({ ctx, params, body }) =>
      schedules.updateSchedule(ctx, p(params).project, p(params).scheduleId, body),
  ),
  route(
    "DELETE",
    schedulePath,
    { operationId: "deleteSchedule", summary: "Delete a schedule", access: "editor" },
    ({ ctx, params }) => schedules.deleteSchedule(ctx, p(params).project, p(params).scheduleId),
  ),
  route(
    "POST",
    `${schedulePath}/trigger`,
    {
      operationId: "triggerSchedule",
      summary: "Fire a schedule now (paused or not), as its cron would",
      description: "Answers at once; the fire's outcome shows in `lastStatus` and the request log.",
      access: "editor",
      answer: answers.schedule,
      status: 202,
    },
    ({ ctx, params }) => schedules.triggerSchedule(ctx, p(params).project, p(params).scheduleId),
  ),
]);
