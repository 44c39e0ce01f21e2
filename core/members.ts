/** Member tokens' lifetime: an optional expiry chosen at creation, within a bound. */
import { RelayError } from "./errors.ts";
import { DAY_MS } from "./policy.ts";

/** The furthest a member token's expiry may be set ahead of its creation. */
export const MAX_MEMBER_TOKEN_DAYS = 366;

/** `expiresAt` if it lies after `now` and within MAX_MEMBER_TOKEN_DAYS of it; else a 400. */
export function memberTokenExpiry(expiresAt: Date | null, now: Date): Date | null {
  if (expiresAt === null) return null;
  const ahead = expiresAt.getTime() - now.getTime();
  if (ahead <= 0) throw badExpiry("must be in the future");
  if (ahead > MAX_MEMBER_TOKEN_DAYS * DAY_MS) {
    throw badExpiry(`may be at most ${MAX_MEMBER_TOKEN_DAYS} days ahead`);
  }
  return expiresAt;
}

const badExpiry = (message: string) =>
  new RelayError("bad_request", `expiresAt ${message}`, [{ path: "expiresAt", message }]);

/** Whether a member's token still signs in: until its expiry, if it has one. */
export function memberTokenAccepted(member: { expiresAt: Date | null }, now: Date): boolean {
  return member.expiresAt === null || now.getTime() < member.expiresAt.getTime();
}
