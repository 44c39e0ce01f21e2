/**
 * A project's members as stored: a name, a role, a SHA-256 hash of their token and the token's
 * optional expiry.
 */
import type { Role } from "../core/model.ts";
import { newId } from "../core/secrets.ts";
import type { Queryable, Sql } from "./db.ts";

export interface MemberView {
  id: string;
  name: string;
  role: Role;
  createdAt: Date;
  /** Null: the token never expires. */
  expiresAt: Date | null;
}

export interface NewMember {
  projectId: string;
  name: string;
  role: Role;
  tokenHash: Uint8Array;
  expiresAt?: Date | null;
}

export interface MemberCredentials {
  id: string;
  projectId: string;
  role: Role;
  tokenHash: Buffer;
  expiresAt: Date | null;
}

export async function insertMember(tx: Queryable, member: NewMember): Promise<MemberView> {
  const [row] = await tx<MemberView[]>`
    insert into members (id, project_id, name, role, token_hash, expires_at)
    values (${newId("mem")}, ${member.projectId}, ${member.name}, ${member.role},
      ${member.tokenHash}, ${member.expiresAt ?? null})
    returning id, name, role, created_at, expires_at`;
  return row as MemberView;
}

export function listMembers(sql: Sql, projectId: string): Promise<MemberView[]> {
  return sql<MemberView[]>`
    select id, name, role, created_at, expires_at from members
    where project_id = ${projectId} order by created_at, id`;
}

/**
 * Removes the member unless the project would be left with no owner whose token never expires
 * (one whose token expires would leave the project to the admin alone once it did); an owner
 * whose token has expired already may go. The check and the delete run under
 * the project row's lock, so two removals in one project (two owners removing each other at
 * once) take turns and the second sees the first's result. `no key update` leaves the project's
 * other writes alone: their foreign keys take only a key-share lock, which it does not block.
 */
export function deleteMember(
  sql: Sql,
  projectId: string,
  memberId: string,
  now: Date,
): Promise<"removed" | "not_found" | "last_owner"> {
  return sql.begin(async (tx) => {
    await tx`select 1 from projects where id = ${projectId} for no key update`;
    const [member] = await tx<{ role: Role; expiresAt: Date | null; lasting: number }[]>`
      select role, expires_at, (select count(*)::int from members
        where project_id = ${projectId} and role = 'owner' and id <> ${memberId}
          and expires_at is null) as lasting
      from members where id = ${memberId} and project_id = ${projectId}`;
    if (!member) return "not_found";
    const expired = member.expiresAt !== null && member.expiresAt <= now;
    if (member.role === "owner" && !expired && member.lasting === 0) return "last_owner";
    await tx`delete from members where id = ${memberId}`;
    return "removed";
  });
}

/**
 * Gives the member a new token hash in place, so the old token stops matching at once; the
 * expiry stays. Undefined when the project has no such member.
 */
export async function replaceTokenHash(
  sql: Sql,
  projectId: string,
  memberId: string,
  tokenHash: Uint8Array,
): Promise<MemberView | undefined> {
  const [member] = await sql<MemberView[]>`
    update members set token_hash = ${tokenHash}
    where id = ${memberId} and project_id = ${projectId}
    returning id, name, role, created_at, expires_at`;
  return member;
}

/** The member a token hash belongs to; the caller still compares the hash in constant time. */
export async function memberByTokenHash(
  sql: Sql,
  tokenHash: Uint8Array,
): Promise<MemberCredentials | undefined> {
  const [member] = await sql<MemberCredentials[]>`
    select id, project_id, role, token_hash, expires_at from members where token_hash = ${tokenHash}`;
  return member;
}
