/**
 * The Dev clock routes: moving a development stack's time, for the admin. They exist only when the
 * control plane runs with RELAY_DEV_CLOCK=1 (the router leaves them out otherwise: 404, as a path
 * no route has, whatever the token).
 */
import { z } from "zod";
import * as answers from "../api/answers.ts";
import { parseInput } from "../api/validation.ts";
import { requireAdmin } from "../auth.ts";
import { type Route, route, tagged } from "./contract.ts";

const DEV_CLOCK_ONLY = "Only when the control plane runs with RELAY_DEV_CLOCK=1; otherwise 404.";

const advanceClockBody = z.strictObject({ advanceSeconds: z.number().finite() });

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
      requireAdmin(ctx.caller);
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
      requireAdmin(ctx.caller);
      return { rotated: await app.runRotation() };
    },
  ),
]);
