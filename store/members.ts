/** A project's members as stored: a name, a role and a SHA-256 hash of their token. */
import type { Role } from "../core/model.ts";
import { newId } from "../core/secrets.ts";
import type { Queryable, Sql } from "./db.ts";
import type { ProjectView } from "./projects.ts";

export interface MemberView {
  id: string;
  name: string;
  role: Role;
  createdAt: Date;
}

export interface NewMember {
  projectId: string;
  name: string;
  role: Role;
  tokenHash: Uint8Array;
}

export interface MemberCredentials {
  id: string;
  projectId: string;
  role: Role;
  tokenHash: Buffer;
}

export async function insertMember(tx: Queryable, member: NewMember): Promise<MemberView> {
  const [row] = await tx<MemberView[]>`
    insert into members (id, project_id, name, role, token_hash)
    values (${newId("mem")}, ${member.projectId}, ${member.name}, ${member.role},
      ${member.tokenHash})
    returning id, name, role, created_at`;
  return row as MemberView;
}

export function listMembers(sql: Sql, projectId: string): Promise<MemberView[]> {
  return sql<MemberView[]>`
    select id, name, role, created_at from members
    where project_id = ${projectId} order by created_at, id`;
}

/** False when the project has no such member. */
export async function deleteMember(
  sql: Sql,
  projectId: string,
  memberId: string,
): Promise<boolean> {
  const removed = await sql`
    delete from members where id = ${memberId} and project_id = ${projectId}`;
  return removed.count > 0;
}

/** The member a token hash belongs to; the caller still compares the hash in constant time. */
export async function memberByTokenHash(
  sql: Sql,
  tokenHash: Uint8Array,
): Promise<MemberCredentials | undefined> {
  const [member] = await sql<MemberCredentials[]>`
    select id, project_id, role, token_hash from members where token_hash = ${tokenHash}`;
  return member;
}

/** The member's project, with their role and name in it. */
export function membershipsOf(
  sql: Sql,
  memberId: string,
): Promise<(ProjectView & { role: Role; memberName: string })[]> {
  return sql<(ProjectView & { role: Role; memberName: string })[]>`
    select p.slug, p.name, p.plan, p.created_at, m.role, m.name as member_name
    from members m join projects p on p.id = m.project_id
    where m.id = ${memberId}`;
}
