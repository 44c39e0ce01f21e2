/**
 * Delayed delivery: an async call may ask to be delivered later, `Relay-Delay: <n>s|m|h|d` from
 * now or `Relay-Not-Before: <RFC 3339 time>`, at most 7 days ahead either way. Its workflow waits
 * on a durable Temporal timer, so a delayed request costs no attempt and no poll while it waits.
 */
import { DAY_MS } from "./policy.ts";

export const DELAY_HEADER = "relay-delay";
export const NOT_BEFORE_HEADER = "relay-not-before";

/** The longest a call may ask to wait (QStash's and the spec's bound). */
export const MAX_DELAY_MS = 7 * DAY_MS;

const UNIT_MS = { s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS } as const;
/** Seven digits of seconds already pass 7 days: anything longer is refused before arithmetic. */
const DELAY = /^(\d{1,7})([smhd])$/;
/** RFC 3339's date-time: a full date, a full time, and a zone (Z or an offset); no other form. */
const RFC_3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})$/;

/** When a call is to be delivered: `null` at once; or why its headers cannot say. */
export type DeliveryTime = { notBefore: Date | null } | { problem: string };

/**
 * Reads the two headers at `now` (the stack's clock). A time already past, or a zero delay, is
 * "at once" rather than an error: a caller's clock may run behind Relay's.
 */
export function deliveryTime(
  headers: { delay: string | null; notBefore: string | null },
  now: Date,
): DeliveryTime {
  const { delay, notBefore } = headers;
  if (delay !== null && notBefore !== null) {
    return { problem: "send Relay-Delay or Relay-Not-Before, not both" };
  }
  let at: number;
  if (delay !== null) {
    const match = DELAY.exec(delay.trim());
    if (!match) {
      return { problem: "Relay-Delay must be a whole number of s, m, h or d, such as 30s or 2h" };
    }
    at = now.getTime() + Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
  } else if (notBefore !== null) {
    const parsed = rfc3339(notBefore.trim());
    if (parsed === null) {
      return {
        problem: "Relay-Not-Before must be an RFC 3339 time, such as 2026-11-24T12:00:00Z",
      };
    }
    at = parsed;
  } else {
    return { notBefore: null };
  }
  if (at - now.getTime() > MAX_DELAY_MS) {
    return { problem: "a delivery may be delayed by at most 7 days" };
  }
  return { notBefore: at > now.getTime() ? new Date(at) : null };
}

/** Milliseconds since the epoch of an RFC 3339 time; null for anything else (2026-02-30 too). */
function rfc3339(text: string): number | null {
  const match = RFC_3339.exec(text);
  if (!match) return null;
  const written = match.slice(1, 7).map(Number);
  // Date.parse would roll 2026-02-30 over to March: the fields must stand as written.
  const [y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0] = written;
  const fields = new Date(Date.UTC(y, mo - 1, d, h, mi, s));
  const read = [
    fields.getUTCFullYear(),
    fields.getUTCMonth() + 1,
    fields.getUTCDate(),
    fields.getUTCHours(),
    fields.getUTCMinutes(),
    fields.getUTCSeconds(),
  ];
  if (read.some((value, i) => value !== written[i])) return null;
  const ms = Date.parse(text.toUpperCase().replace(" ", "T"));
  return Number.isNaN(ms) ? null : ms;
}
