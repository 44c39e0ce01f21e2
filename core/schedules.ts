/**
 * Schedules: an endpoint may carry cron schedules, each a stored body and headers that Relay sends
 * to the endpoint when the cron says, as a call through the edge's whole pipeline (credits, rate
 * limits, targets in their modes, the log). Temporal Schedules keep the time; the control plane
 * makes each fire's call, with a token the edges check instead of an API key (`fireToken`).
 */
import { type KeyMode, keyModes, type Plan } from "./model.ts";
import { base64url, timingSafeEqual } from "./secrets.ts";

/** How many schedules a project may have, and how close together two fires of one may come. */
export const SCHEDULE_LIMITS: Record<Plan, { count: number; shortestMinutes: number }> = {
  free: { count: 10, shortestMinutes: 5 },
  paid: { count: 1000, shortestMinutes: 1 },
};

/**
 * Fires a control plane sends at once (of its activity worker's 100 slots, the rest for recovery
 * jobs' steps), and one project's share of them while they are contended.
 */
export const FIRE_SLOTS = { slots: 64, perProject: 8 };

/** A fire in flight says so this often; one silent for 10 s is sent again (workflows/schedules.ts). */
export const FIRE_HEARTBEAT_MS = 3000;

/** The most a schedule's stored body may weigh. */
export const MAX_SCHEDULE_BODY_BYTES = 64 * 1024;

/** Every fire carries its schedule's id, to the log and to the targets. */
export const SCHEDULE_ID_HEADER = "relay-schedule-id";

/** The Authorization scheme of a fire's call to the edge. */
export const FIRE_SCHEME = "Relay-Fire";

/** A fire's token is good this long either side of its issue (clocks of processes differ a little). */
export const FIRE_TOKEN_TTL_MS = 5 * 60_000;

const SHORTHANDS = new Map(
  Object.entries({
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
  }),
);

const MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/** The five fields: name, lowest, highest, and the names that stand for numbers. */
const FIELDS = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  { name: "month", min: 1, max: 12, names: MONTHS },
  { name: "day of week", min: 0, max: 7, names: DAYS },
] as const;

/** A cron expression read: the minutes it fires at (the rest only narrows which hours and days). */
export interface Cron {
  minutes: number[];
}

/**
 * Reads a five-field cron expression (minute hour day-of-month month day-of-week; `*`, numbers,
 * `a-b`, `*\/n`, `a-b/n`, lists, month and day names) or a shorthand (`@hourly`, `@daily`,
 * `@weekly`, `@monthly`, `@yearly`), the forms Temporal reads the same way. Seconds, years,
 * `@every`, `TZ=` and comments are refused: the time zone is a field of its own.
 */
export function parseCron(expression: string): Cron | { problem: string } {
  const text = SHORTHANDS.get(expression.trim().toLowerCase()) ?? expression.trim();
  const parts = text.split(/\s+/);
  if (parts.length !== FIELDS.length) {
    return { problem: "must have five fields (minute hour day-of-month month day-of-week)" };
  }
  const values: number[][] = [];
  for (const [i, field] of FIELDS.entries()) {
    const read = fieldValues(parts[i] ?? "", field);
    if (typeof read === "string") return { problem: `its ${field.name} field ${read}` };
    values.push(read);
  }
  return { minutes: values[0] ?? [] };
}

function fieldValues(
  text: string,
  field: { min: number; max: number; names?: readonly string[] },
): number[] | string {
  const number = (token: string): number | undefined => {
    const named = field.names?.indexOf(token.toUpperCase()) ?? -1;
    if (named >= 0) return named + field.min;
    return /^\d{1,2}$/.test(token) ? Number(token) : undefined;
  };
  const values = new Set<number>();
  for (const item of text.split(",")) {
    const [, range = "", step] = /^([^/]+)(?:\/(\d{1,2}))?$/.exec(item) ?? [];
    let from = field.min;
    let to = field.max;
    if (range !== "*") {
      const [low = "", high, ...rest] = range.split("-");
      const a = number(low);
      const b = high === undefined ? a : number(high);
      // `5/15` reads differently among crons: a step needs `*` or a range.
      if (a === undefined || b === undefined || rest.length > 0 || (step && high === undefined)) {
        return `has '${item}', not a value, a range or a step`;
      }
      [from, to] = [a, b];
    }
    const by = step === undefined ? 1 : Number(step);
    if (from < field.min || to > field.max || from > to || by < 1) {
      return `has '${item}', outside ${field.min}-${field.max}`;
    }
    for (let v = from; v <= to; v += by) values.add(v);
  }
  return [...values].sort((a, b) => a - b);
}

/**
 * The shortest time between two fires, in minutes, at most: the shortest step between its minutes,
 * the one across the hour counted (an hour may repeat when a time zone's clocks go back).
 */
export function shortestGapMinutes(cron: Cron): number {
  const { minutes } = cron;
  const first = minutes[0] ?? 0;
  let gap = 60 - (minutes.at(-1) ?? 0) + first;
  for (let i = 1; i < minutes.length; i++) {
    gap = Math.min(gap, (minutes[i] ?? 0) - (minutes[i - 1] ?? 0));
  }
  return gap;
}

/** Whether the runtime (and so Temporal, from the same IANA database) knows the time zone. */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat("en", { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** What a fire's token vouches for: this schedule sends this call, now. */
export interface FireClaims {
  project: string;
  /** `/{line}/{endpoint}`, as the call's path names it. */
  route: string;
  scheduleId: string;
  /** The credit pool the fire is billed to, as a key of that mode would be. */
  mode: KeyMode;
  /** The fire's Idempotency-Key: one fire is delivered once, however often its call is sent. */
  fireId: string;
  issuedAt: number;
}

type Sign = (key: CryptoKey, data: Uint8Array<ArrayBuffer>) => Promise<ArrayBuffer>;
const sign: Sign = (key, data) => crypto.subtle.sign("HMAC", key, data);

/** The key fire tokens are signed with: derived from the edges' shared token, for this use only. */
export async function importFireKey(edgeToken: string): Promise<CryptoKey> {
  const material = await crypto.subtle.digest(
    "SHA-256",
    new TextEncoder().encode(`relay schedule fires\n${edgeToken}`),
  );
  return crypto.subtle.importKey("raw", material, { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
}

function claimsText(c: FireClaims): Uint8Array<ArrayBuffer> {
  const fields = ["v1", c.project, c.route, c.scheduleId, c.mode, c.fireId, String(c.issuedAt)];
  return new TextEncoder().encode(fields.join("\n"));
}

/** The Authorization value of a fire's call. */
export async function fireToken(key: CryptoKey, claims: FireClaims): Promise<string> {
  const mac = new Uint8Array(await sign(key, claimsText(claims)));
  return `${FIRE_SCHEME} ${claims.scheduleId}.${claims.mode}.${claims.issuedAt}.${base64url(mac)}`;
}

const FIRE_TOKEN =
  /^relay-fire +(sch_[A-Za-z0-9_-]{1,40})\.([a-z]{1,8})\.(\d{1,15})\.([A-Za-z0-9_-]{43})$/i;

/** Whether an Authorization is a fire's (its scheme), good or not: an API key's call is not. */
export const isFireToken = (authorization: string) => /^relay-fire /i.test(authorization);

/**
 * The schedule and credit pool a fire's Authorization vouches for, when it is signed for this
 * project, path and Idempotency-Key, and issued within `FIRE_TOKEN_TTL_MS` of `now`; else null.
 */
export async function verifyFireToken(
  key: CryptoKey,
  authorization: string,
  call: Pick<FireClaims, "project" | "route"> & { fireId: string | null },
  now: Date,
): Promise<{ scheduleId: string; mode: KeyMode } | null> {
  const [, scheduleId = "", modeText = "", issued = "", mac = ""] =
    FIRE_TOKEN.exec(authorization) ?? [];
  const mode = keyModes.find((m) => m === modeText);
  const issuedAt = Number(issued);
  if (!mode || !call.fireId || Math.abs(now.getTime() - issuedAt) > FIRE_TOKEN_TTL_MS) return null;
  const claims = { ...call, fireId: call.fireId, scheduleId, mode, issuedAt };
  const expected = base64url(new Uint8Array(await sign(key, claimsText(claims))));
  const encoder = new TextEncoder();
  return timingSafeEqual(encoder.encode(expected), encoder.encode(mac))
    ? { scheduleId, mode }
    : null;
}

/** The control plane's side of a fire (control/api/schedule-fires.ts). */
export interface ScheduleActivities {
  /**
   * Sends the schedule's call to the edge as the fire `fireId` (its Idempotency-Key) and records
   * the answer's status; "gone" when the schedule no longer exists (its Temporal Schedule is then
   * deleted too).
   */
  sendScheduledCall(fire: { scheduleId: string; fireId: string }): Promise<number | "gone">;
}
