/**
 * A schedule's fire (core/schedules.ts), the activity the control plane serves its workflow: the
 * schedule's call, sent to an edge as a caller's is, so the whole pipeline applies (the endpoint's
 * schema, rate limits, credits, each target in its mode, the log). It carries a token the edge
 * takes instead of an API key, good for this fire only, and the fire's id as its Idempotency-Key,
 * so a fire sent again (an activity retried) is delivered once.
 */
import { Context } from "@temporalio/activity";
import type { Client } from "@temporalio/client";
import { ApplicationFailure } from "@temporalio/common";
import { ProjectSlots } from "../../core/project-slots.ts";
import {
  FIRE_HEARTBEAT_MS,
  FIRE_SLOTS,
  fireToken,
  SCHEDULE_ID_HEADER,
  type ScheduleActivities,
} from "../../core/schedules.ts";
import type { Sql } from "../../store/db.ts";
import * as schedules from "../../store/schedules.ts";
import { forgetSchedule } from "./schedules.ts";

export interface ScheduleFireDeps {
  sql: Sql;
  now: () => Date;
  temporal: () => Promise<Client>;
  /** What signs fire tokens (`importFireKey`, from the edges' shared token). */
  fireKey: CryptoKey;
  /** Where an edge listens, or the balancer before the edges (RELAY_EDGE_URL). */
  edgeUrl: URL;
  /** The inbound domain: a fire's Host is `{project}.{domain}`. */
  edgeDomain: string;
  /** A fetch that may set Host, and reads an answer whole. */
  fetch: typeof fetch;
}

export function scheduleActivities(deps: ScheduleFireDeps): ScheduleActivities {
  // A fire to a sync target holds its activity slot until the target answers (up to 90 s):
  // one project's slow fires may hold only its share of this control plane's.
  const slots = new ProjectSlots(FIRE_SLOTS);
  return {
    async sendScheduledCall(fire) {
      const schedule = await schedules.findSchedule(deps.sql, fire.scheduleId);
      if (!schedule) {
        // Deleted with its endpoint or project, or its row never committed.
        await forgetSchedule(await deps.temporal(), fire.scheduleId);
        return "gone";
      }
      const release = slots.take(schedule.project);
      if (!release) {
        throw ApplicationFailure.create({
          message: `project ${schedule.project} has its share of fires in flight`,
          nextRetryDelay: slots.waitMs(schedule.project, Math.random()),
        });
      }
      // A fire lost with its control plane is sent again soon, not after the call's whole limit.
      const context = Context.current();
      const beat = setInterval(() => context.heartbeat(), FIRE_HEARTBEAT_MS);
      try {
        return await sendScheduledCall(deps, schedule, fire.fireId);
      } finally {
        clearInterval(beat);
        release();
      }
    },
  };
}

async function sendScheduledCall(
  deps: ScheduleFireDeps,
  schedule: schedules.ScheduleRow,
  fireId: string,
): Promise<number> {
  const route = `/${schedule.endpoint}`;
  const authorization = await fireToken(deps.fireKey, {
    project: schedule.project,
    route,
    scheduleId: schedule.scheduleId,
    mode: schedule.mode,
    fireId,
    issuedAt: deps.now().getTime(),
  });
  const answer = await deps.fetch(new URL(route, deps.edgeUrl), {
    method: "POST",
    headers: {
      ...schedule.headers,
      host: `${schedule.project}.${deps.edgeDomain}`,
      authorization,
      "idempotency-key": fireId,
      [SCHEDULE_ID_HEADER]: schedule.scheduleId,
      ...(schedule.body !== null && { "content-type": "application/json" }),
    },
    body: schedule.body,
  });
  const requestId = answer.headers.get("x-relay-request-id");
  // An edge that could not take the call (overloaded, the project over its rate): the
  // activity's retry sends it again, as a caller would.
  if (answer.status === 429 || (requestId === null && answer.status >= 500)) {
    throw new Error(`the edge answered ${answer.status} to schedule ${schedule.scheduleId}'s fire`);
  }
  await schedules.recordFire(deps.sql, schedule.scheduleId, {
    at: deps.now(),
    status: answer.status,
    requestId,
  });
  return answer.status;
}
