/**
 * Who is calling the control plane, from the bearer token. Tokens are compared by hash, hashed
 * with node:crypto: every edge call is authenticated, and Web Crypto's digest costs a trip
 * through libuv's pool each time.
 */
import { RelayError } from "../core/errors.ts";
import { memberTokenAccepted } from "../core/members.ts";
import type { Role } from "../core/model.ts";
import { timingSafeEqual } from "../core/secrets.ts";
import { sha256 } from "../platform/node-crypto.ts";
import type { Sql } from "../store/db.ts";
import { memberByTokenHash } from "../store/members.ts";

export type Caller =
  | { kind: "anonymous" }
  | { kind: "admin" }
  | { kind: "edge" }
  | { kind: "member"; memberId: string; projectId: string; role: Role };

export interface Credentials {
  adminTokenHash: Uint8Array;
  edgeTokenHash: Uint8Array;
}

export function credentialsFrom(config: {
  RELAY_ADMIN_TOKEN: string;
  RELAY_EDGE_TOKEN: string;
}): Credentials {
  return {
    adminTokenHash: sha256(config.RELAY_ADMIN_TOKEN),
    edgeTokenHash: sha256(config.RELAY_EDGE_TOKEN),
  };
}

export function bearerToken(authorization: string | null | undefined): string | null {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? "");
  return match?.[1] ?? null;
}

/** An expired member token is refused exactly like an unknown one. */
export async function authenticate(
  { sql, now }: { sql: Sql; now: () => Date },
  credentials: Credentials,
  authorization: string | null | undefined,
): Promise<Caller> {
  const token = bearerToken(authorization);
  if (!token) return { kind: "anonymous" };
  const hash = sha256(token);
  if (timingSafeEqual(hash, credentials.adminTokenHash)) return { kind: "admin" };
  if (timingSafeEqual(hash, credentials.edgeTokenHash)) return { kind: "edge" };
  const member = await memberByTokenHash(sql, hash);
  if (
    !member ||
    !timingSafeEqual(new Uint8Array(member.tokenHash), hash) ||
    !memberTokenAccepted(member, now())
  ) {
    throw new RelayError("unauthenticated", "missing or invalid token");
  }
  return { kind: "member", memberId: member.id, projectId: member.projectId, role: member.role };
}

export function requireAdmin(caller: Caller): void {
  if (caller.kind === "admin") return;
  throw caller.kind === "anonymous"
    ? new RelayError("unauthenticated", "missing or invalid token")
    : new RelayError("forbidden", "this operation needs the admin token");
}

export function requireEdge(caller: Caller): void {
  if (caller.kind === "edge") return;
  throw caller.kind === "anonymous"
    ? new RelayError("unauthenticated", "missing or invalid token")
    : new RelayError("forbidden", "this operation is for edges");
}
