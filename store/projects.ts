/**
 * Projects as stored: each one's slug, plan and key policy. A new project comes with its owner
 * and its starting credits in one transaction.
 */
import { keyModes, type Plan, type Policy, type Role } from "../core/model.ts";
import { newId } from "../core/secrets.ts";
import { grantCredits } from "./credits.ts";
import type { Queryable, Sql } from "./db.ts";
import { insertMember, type MemberView, type NewMember } from "./members.ts";

export interface ProjectView {
  slug: string;
  name: string;
  plan: Plan;
  createdAt: Date;
}

export interface ProjectRow extends ProjectView {
  id: string;
}

export interface NewProject {
  slug: string;
  name: string;
  plan: Plan;
}

/**
 * The project, its first owner and `credits` in each pool (none when 0), together or not at all.
 * A taken slug fails with a unique violation.
 */
export function createProject(
  sql: Sql,
  project: NewProject,
  owner: Omit<NewMember, "projectId" | "role">,
  credits: number,
): Promise<{ project: ProjectView; owner: MemberView }> {
  return sql.begin(async (tx) => {
    const projectId = newId("prj");
    const [created] = await tx<ProjectView[]>`
      insert into projects (id, slug, name, plan)
      values (${projectId}, ${project.slug}, ${project.name}, ${project.plan})
      returning slug, name, plan, created_at`;
    const member = await insertMember(tx, { ...owner, projectId, role: "owner" });
    for (const pool of keyModes) {
      if (credits > 0) await grantCredits(tx, projectId, pool, credits);
    }
    return { project: created as ProjectView, owner: member };
  });
}

export async function projectBySlug(sql: Queryable, slug: string): Promise<ProjectRow | undefined> {
  const [project] = await sql<ProjectRow[]>`
    select id, slug, name, plan, created_at from projects where slug = ${slug}`;
  return project;
}

export async function projectById(sql: Sql, id: string): Promise<ProjectView | undefined> {
  const [project] = await sql<ProjectView[]>`
    select slug, name, plan, created_at from projects where id = ${id}`;
  return project;
}

export function allProjects(sql: Sql): Promise<ProjectView[]> {
  return sql<ProjectView[]>`select slug, name, plan, created_at from projects order by slug`;
}

/** The member's project, with their role and name in it. */
export function membershipsOf(
  sql: Sql,
  memberId: string,
): Promise<(ProjectView & { role: Role; memberName: string; memberId: string })[]> {
  return sql<(ProjectView & { role: Role; memberName: string; memberId: string })[]>`
    select p.slug, p.name, p.plan, p.created_at, m.role, m.name as member_name,
      m.id as member_id
    from members m join projects p on p.id = m.project_id
    where m.id = ${memberId}`;
}

export async function projectPolicy(sql: Sql, projectId: string): Promise<Policy | undefined> {
  const [policy] = await sql<Policy[]>`
    select default_key_ttl_days, max_key_ttl_days, editors_may_create_non_expiring_keys
    from projects where id = ${projectId}`;
  return policy;
}

export async function updatePolicy(sql: Sql, projectId: string, policy: Policy): Promise<void> {
  await sql`
    update projects set
      default_key_ttl_days = ${policy.defaultKeyTtlDays},
      max_key_ttl_days = ${policy.maxKeyTtlDays},
      editors_may_create_non_expiring_keys = ${policy.editorsMayCreateNonExpiringKeys}
    where id = ${projectId}`;
}
