/**
 * ScheduleService: an endpoint's crons (control/api/schedules.ts) over Connect. A schedule's body
 * travels as a google.protobuf.Value, converted to and from the JSON value the operations take.
 */
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { keyModes } from "../../core/model.ts";
import { ScheduleService, type ScheduleSpec } from "../../gen/relay/v1/schedules_pb.ts";
import type { ScheduleSummaryView, ScheduleView } from "../api/schedules.ts";
import * as schedules from "../api/schedules.ts";
import type { ContextOf } from "./caller.ts";
import { fromEnum, optionalTs, toEnum, ts } from "./convert.ts";

export function scheduleService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(ScheduleService, {
    async createSchedule(req, h) {
      const { project, line, path } = req;
      const made = await schedules.createSchedule(ctxOf(h), project, line, path, specIn(req.spec));
      return { schedule: scheduleOut(made) };
    },
    async getSchedule(req, h) {
      return {
        schedule: scheduleOut(await schedules.getSchedule(ctxOf(h), req.project, req.scheduleId)),
      };
    },
    async listSchedules(req, h) {
      const endpoint =
        req.line !== undefined && req.path !== undefined
          ? { line: req.line, path: req.path }
          : undefined;
      const list = await schedules.listSchedules(ctxOf(h), req.project, endpoint);
      return { schedules: list.schedules.map(scheduleOut) };
    },
    async updateSchedule(req, h) {
      const { project, scheduleId } = req;
      const changed = await schedules.updateSchedule(
        ctxOf(h),
        project,
        scheduleId,
        specIn(req.spec),
      );
      return { schedule: scheduleOut(changed) };
    },
    async deleteSchedule(req, h) {
      await schedules.deleteSchedule(ctxOf(h), req.project, req.scheduleId);
      return {};
    },
    async triggerSchedule(req, h) {
      const fired = await schedules.triggerSchedule(ctxOf(h), req.project, req.scheduleId);
      return { schedule: scheduleOut(fired) };
    },
  });
}

/** The fields set, as the REST body would carry them; unset ones left out. */
function specIn(spec: ScheduleSpec | undefined) {
  if (!spec) return {};
  const { cron, timeZone, body, headers, mode, paused, note } = spec;
  return {
    ...(cron !== undefined && { cron }),
    ...(timeZone !== undefined && { timeZone }),
    ...(body !== undefined && { body: toJson(ValueSchema, body) }),
    ...(headers !== undefined && { headers: headers.values }),
    // An unknown mode stays in, for the operation to refuse.
    ...(mode !== undefined && { mode: fromEnum(keyModes, mode) ?? String(mode) }),
    ...(paused !== undefined && { paused }),
    ...(note !== undefined && { note }),
  };
}

/** A schedule; one of a list has no body nor headers (unset). */
function scheduleOut(s: ScheduleView | ScheduleSummaryView) {
  return {
    ...s,
    body: "body" in s ? fromJson(ValueSchema, (s.body ?? null) as JsonValue) : undefined,
    mode: toEnum(keyModes, s.mode),
    lastFiredAt: optionalTs(s.lastFiredAt),
    lastStatus: s.lastStatus ?? undefined,
    lastRequestId: s.lastRequestId ?? undefined,
    nextFireAt: "nextFireAt" in s ? optionalTs(s.nextFireAt ?? null) : undefined,
    createdAt: ts(s.createdAt),
    updatedAt: ts(s.updatedAt),
  };
}
