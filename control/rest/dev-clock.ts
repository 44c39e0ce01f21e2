/**
 * The Dev clock routes: moving a development stack's time. They exist only when the control plane
 * runs with RELAY_DEV_CLOCK=1; otherwise they answer 404, as a path no route has.
 */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import * as answers from "../api/answers.ts";
import type { Ctx } from "../api/context.ts";
import { parseInput } from "../api/validation.ts";
import type { ControlApp } from "../app.ts";
import { requireAdmin } from "../auth.ts";
import { type Route, route, tagged } from "./contract.ts";

const DEV_CLOCK_ONLY = "Only when the control plane runs with RELAY_DEV_CLOCK=1; otherwise 404.";

const advanceClockBody = z.strictObject({ advanceSeconds: z.number().finite() });

/** The dev-clock routes do not exist unless RELAY_DEV_CLOCK=1, and then only for the admin. */
function devOnly(app: ControlApp, ctx: Ctx): void {
  if (!app.devClock) throw new RelayError("not_found", "no such route");
  requireAdmin(ctx.caller);
}

export const devClockRoutes: Route[] = tagged("Dev clock", [
  route(
    "POST",
    "/admin/clock",
    {
      operationId: "advanceClock",
      summary: "Move the stack's time forward",
      description: `${DEV_CLOCK_ONLY} Answers once every edge runs on the new time.`,
      access: "admin",
      body: advanceClockBody,
      example: { advanceSeconds: 86400 },
      answer: answers.clock,
      status: 200,
      errors: ["not_found"],
    },
    async ({ app, ctx, body }) => {
      devOnly(app, ctx);
      const { advanceSeconds } = parseInput(advanceClockBody, body);
      const offsetMs = await app.clock.advance(advanceSeconds);
      return { now: app.clock.now(), offsetMs };
    },
  ),
  route(
    "POST",
    "/admin/rotation/run",
    {
      operationId: "runRotation",
      summary: "Run the daily key rotation now",
      description: DEV_CLOCK_ONLY,
      access: "admin",
      answer: answers.rotationRun,
      status: 200,
      errors: ["not_found"],
    },
    async ({ app, ctx }) => {
      devOnly(app, ctx);
      return { rotated: await app.runRotation() };
    },
  ),
]);
