/**
 * Schedules (core/schedules.ts): an endpoint's crons, each with the call it sends. Postgres keeps
 * the call, Temporal's Schedule of the same id keeps the time; both change together here, the
 * Temporal side inside the row's transaction, so a refusal there leaves no row behind.
 */
import { type Client, ScheduleNotFoundError, ScheduleOverlapPolicy } from "@temporalio/client";
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { type KeyMode, keyModes, type Plan } from "../../core/model.ts";
import {
  isTimeZone,
  MAX_SCHEDULE_BODY_BYTES,
  parseCron,
  SCHEDULE_LIMITS,
  shortestGapMinutes,
} from "../../core/schedules.ts";
import { newId } from "../../core/secrets.ts";
import { JOB_TASK_QUEUE, SCHEDULE_FIRE_WORKFLOW } from "../../core/temporal.ts";
import { projectKey } from "../../platform/temporal.ts";
import * as routing from "../../store/routing.ts";
import type { ScheduleRow, ScheduleSpec, ScheduleSummary } from "../../store/schedules.ts";
import * as schedules from "../../store/schedules.ts";
import { type Ctx, projectAccess } from "./context.ts";
import {
  headerName,
  headerValue,
  jsonValue,
  NO_CONTROL_CHARACTERS,
  parseInput,
} from "./validation.ts";

/** Headers a fire's call carries of Relay's own, or that belong to the connection. */
const SET_BY_RELAY =
  /^(host|content-length|content-type|connection|transfer-encoding|te|upgrade|keep-alive|authorization|idempotency-key|relay-schedule-id)$/i;

const MAX_HEADERS = 32;
const PLAIN_TEXT = new RegExp(NO_CONTROL_CHARACTERS);

const scheduleFields = {
  cron: z
    .string()
    .max(200)
    .describe(
      "Five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly; read in `timeZone`",
    ),
  timeZone: z
    .string()
    .max(64)
    .refine(isTimeZone, "must be an IANA time zone, such as UTC or Europe/Paris")
    .describe("The IANA time zone the cron is read in"),
  body: jsonValue.describe("The JSON body each fire sends (at most 64 KiB); absent or null: none"),
  headers: z
    .record(headerName.max(256), headerValue)
    .refine((h) => Object.keys(h).length <= MAX_HEADERS, `at most ${MAX_HEADERS} headers`)
    .refine((h) => Object.keys(h).every((name) => !SET_BY_RELAY.test(name)), {
      message:
        "may not set Host, Content-*, hop-by-hop, Authorization, Idempotency-Key or Relay-Schedule-Id (Relay sets them on each fire)",
    })
    .describe("Headers each fire sends, as a caller's would (Relay-Ordering-Key, Relay-Callback…)"),
  mode: z
    .enum(keyModes)
    .describe("The credit pool the fires are billed to, as a key of that mode's calls are"),
  paused: z.boolean().describe("A paused schedule does not fire (a trigger still does)"),
  note: z
    .string()
    .max(200)
    // Postgres cannot store NUL in text; no control character belongs in a note.
    .refine((note) => note === "" || PLAIN_TEXT.test(note), "must have no control characters")
    .describe("What the schedule is for"),
};

const defaults = {
  timeZone: "UTC",
  body: null,
  headers: {},
  mode: "live",
  paused: false,
  note: "",
};

export const createScheduleBody = z.strictObject(scheduleFields).partial().required({ cron: true });
export const updateScheduleBody = z.strictObject(scheduleFields).partial();

/** The plan's bounds on a cron, and a body's size. */
function scheduleRules(plan: Plan) {
  const shortest = SCHEDULE_LIMITS[plan].shortestMinutes;
  return (spec: { cron?: string | undefined; body?: unknown }, check: z.RefinementCtx) => {
    if (spec.cron !== undefined) {
      const cron = parseCron(spec.cron);
      if ("problem" in cron) {
        check.addIssue({ code: "custom", path: ["cron"], message: cron.problem });
      } else if (shortestGapMinutes(cron) < shortest) {
        check.addIssue({
          code: "custom",
          path: ["cron"],
          message: `fires ${shortestGapMinutes(cron)} minute(s) apart; a ${plan} project's schedules fire at least ${shortest} minute(s) apart`,
        });
      }
    }
    if (spec.body != null && bodyText(spec.body).length > MAX_SCHEDULE_BODY_BYTES) {
      check.addIssue({ code: "custom", path: ["body"], message: "must be at most 64 KiB" });
    }
  };
}

const bodyText = (body: unknown) => new TextEncoder().encode(JSON.stringify(body));

/** A schedule as members read it. */
export interface ScheduleView {
  scheduleId: string;
  endpoint: string;
  cron: string;
  timeZone: string;
  body: unknown;
  headers: Record<string, string>;
  mode: KeyMode;
  paused: boolean;
  note: string;
  fires: number;
  lastFiredAt: Date | null;
  lastStatus: number | null;
  lastRequestId: string | null;
  /** When it fires next, as Temporal plans it (a read of one schedule only); null: paused. */
  nextFireAt?: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

function viewOf(row: ScheduleRow): ScheduleView {
  const { body, headers, ...summary } = row;
  return { ...summaryOf(summary), body: body === null ? null : JSON.parse(body), headers };
}

/** A schedule in a list: its call's body and headers are read one schedule at a time. */
export type ScheduleSummaryView = Omit<ScheduleView, "body" | "headers" | "nextFireAt">;

function summaryOf(row: ScheduleSummary): ScheduleSummaryView {
  const { projectId, endpointId, project, ...view } = row;
  return view;
}

export async function createSchedule(
  ctx: Ctx,
  slug: string,
  line: string,
  path: string,
  input: unknown,
): Promise<ScheduleView> {
  const access = await projectAccess(ctx, slug);
  const given = parseInput(createScheduleBody.superRefine(scheduleRules(access.plan)), input);
  const spec = specOf({ ...defaults, ...given } as ScheduleFields);
  const endpointId = await endpointIdOf(ctx, access.projectId, { line, path });
  const [endpoint] = await routing.loadEndpoints(ctx.sql, access.projectId, { line, path });
  if (endpoint?.targets.some((t) => t.deliveryMode === "stream")) {
    throw new RelayError(
      "conflict",
      `endpoint '${line}/${path}' has a stream target: a stream answers the caller that reads it as it comes, and a schedule's fire has none (nor may a stream's call carry the fire's Idempotency-Key)`,
    );
  }
  const scheduleId = newId("sch");
  const client = await ctx.temporal();
  await ctx.sql.begin(async (tx) => {
    // One schedule is made at a time per project, so the count holds.
    await tx`select 1 from projects where id = ${access.projectId} for update`;
    const most = SCHEDULE_LIMITS[access.plan].count;
    if ((await schedules.countSchedules(tx, access.projectId)) >= most) {
      throw new RelayError(
        "limit_exceeded",
        `a ${access.plan} project has at most ${most} schedules; delete one first`,
      );
    }
    await schedules.insertSchedule(tx, {
      scheduleId,
      projectId: access.projectId,
      endpointId,
      ...spec,
    });
    // Made before the row commits: a control plane that dies in between leaves a Schedule whose
    // first fire finds no row and deletes it (control/api/schedule-fires.ts).
    await client.schedule.create({
      scheduleId,
      spec: { cronExpressions: [spec.cron], timezone: spec.timeZone },
      action: {
        type: "startWorkflow",
        workflowType: SCHEDULE_FIRE_WORKFLOW,
        taskQueue: JOB_TASK_QUEUE,
        // Temporal adds each fire's time: the fire's id, and its call's Idempotency-Key.
        workflowId: scheduleId,
        args: [scheduleId],
        // Found with the project's other workflows (deleted with it).
        typedSearchAttributes: [{ key: projectKey, value: access.slug }],
      },
      // Fires are separate calls, as a cron's outside Relay; one missed while Temporal was
      // down is made up for within a minute, and none later.
      policies: { overlap: ScheduleOverlapPolicy.ALLOW_ALL, catchupWindow: "1 minute" },
      state: { paused: spec.paused, note: `project ${access.slug}` },
    });
  });
  return getSchedule(ctx, access.slug, scheduleId);
}

type ScheduleFields = Omit<ScheduleSpec, "body"> & { body: unknown };

function specOf(fields: ScheduleFields): ScheduleSpec {
  return { ...fields, body: fields.body == null ? null : JSON.stringify(fields.body) };
}

async function endpointIdOf(
  ctx: Ctx,
  projectId: string,
  { line, path }: { line: string; path: string },
): Promise<string> {
  const found = await routing.endpointTargets(ctx.sql, projectId, line, path);
  if (!found) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
  return found.endpointId;
}

async function scheduleOf(ctx: Ctx, slug: string, scheduleId: string) {
  const access = await projectAccess(ctx, slug);
  const row = await schedules.findSchedule(ctx.sql, scheduleId, access.projectId);
  if (!row) throw new RelayError("not_found", `no schedule '${scheduleId}'`);
  return { access, row };
}

export async function getSchedule(ctx: Ctx, slug: string, scheduleId: string) {
  const { row } = await scheduleOf(ctx, slug, scheduleId);
  return { ...viewOf(row), nextFireAt: await nextFireAt(await ctx.temporal(), row) };
}

async function nextFireAt(client: Client, row: ScheduleRow): Promise<Date | null> {
  if (row.paused) return null;
  const described = await client.schedule
    .getHandle(row.scheduleId)
    .describe()
    .catch((error: unknown) => {
      if (error instanceof ScheduleNotFoundError) return undefined;
      throw error;
    });
  return described?.info.nextActionTimes[0] ?? null;
}

/** The project's schedules, or one endpoint's, oldest first. */
export async function listSchedules(
  ctx: Ctx,
  slug: string,
  endpoint?: { line: string; path: string },
): Promise<{ schedules: ScheduleSummaryView[] }> {
  const access = await projectAccess(ctx, slug);
  const endpointId = endpoint && (await endpointIdOf(ctx, access.projectId, endpoint));
  const rows = await schedules.listSchedules(ctx.sql, access.projectId, endpointId);
  return { schedules: rows.map(summaryOf) };
}

export async function updateSchedule(
  ctx: Ctx,
  slug: string,
  scheduleId: string,
  input: unknown,
): Promise<ScheduleView> {
  const { access, row } = await scheduleOf(ctx, slug, scheduleId);
  const given = parseInput(updateScheduleBody.superRefine(scheduleRules(access.plan)), input);
  const current = { ...row, body: row.body === null ? null : JSON.parse(row.body) };
  const spec = specOf({ ...pick(current), ...given } as ScheduleFields);
  const handle = (await ctx.temporal()).schedule.getHandle(scheduleId);
  await ctx.sql.begin(async (tx) => {
    await tx`select 1 from schedules where id = ${scheduleId} for update`;
    await schedules.updateSchedule(tx, scheduleId, spec);
    // One update carries the pause too: Temporal's scheduler applies a pending pause before a
    // pending update in the same task, so a separate pause could be undone by the update's state.
    await handle
      .update((previous) => ({
        ...previous,
        spec: { cronExpressions: [spec.cron], timezone: spec.timeZone },
        state: { ...previous.state, paused: spec.paused },
      }))
      .catch(noTemporalSchedule(scheduleId));
  });
  return getSchedule(ctx, access.slug, scheduleId);
}

function pick(row: ScheduleFields): ScheduleFields {
  const { cron, timeZone, body, headers, mode, paused, note } = row;
  return { cron, timeZone, body, headers, mode, paused, note };
}

export async function deleteSchedule(ctx: Ctx, slug: string, scheduleId: string): Promise<void> {
  await scheduleOf(ctx, slug, scheduleId);
  await forgetSchedule(await ctx.temporal(), scheduleId);
  await schedules.deleteSchedule(ctx.sql, scheduleId);
}

/**
 * Deletes the Temporal Schedules of schedules whose rows went with their endpoint; one that
 * fails here deletes itself at its next fire, finding no row.
 */
export async function forgetSchedules(ctx: Ctx, scheduleIds: string[]): Promise<void> {
  if (scheduleIds.length === 0) return;
  const client = await ctx.temporal();
  await Promise.all(scheduleIds.map((id) => forgetSchedule(client, id))).catch(() => undefined);
}

/** Deletes a schedule's Temporal Schedule; one already gone is not an error. */
export async function forgetSchedule(client: Client, scheduleId: string): Promise<void> {
  await client.schedule
    .getHandle(scheduleId)
    .delete()
    .catch((error: unknown) => {
      if (!(error instanceof ScheduleNotFoundError)) throw error;
    });
}

/**
 * A schedule whose Temporal Schedule is gone (deleted there by hand): 409 rather than a 500; a
 * DELETE still deletes it.
 */
function noTemporalSchedule(scheduleId: string) {
  return (error: unknown): never => {
    if (!(error instanceof ScheduleNotFoundError)) throw error;
    throw new RelayError(
      "conflict",
      `schedule '${scheduleId}' has no Temporal Schedule; delete it`,
    );
  };
}

/** Fires the schedule now, through its Temporal Schedule as a timed fire is (paused or not). */
export async function triggerSchedule(
  ctx: Ctx,
  slug: string,
  scheduleId: string,
): Promise<ScheduleView> {
  const { access } = await scheduleOf(ctx, slug, scheduleId);
  const handle = (await ctx.temporal()).schedule.getHandle(scheduleId);
  await handle.trigger(ScheduleOverlapPolicy.ALLOW_ALL).catch(noTemporalSchedule(scheduleId));
  return getSchedule(ctx, access.slug, scheduleId);
}
