/** Projects, members and the key policy. */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import {
  keyModes,
  type Plan,
  type Policy,
  PROJECT_SLUG,
  plans,
  type Role,
  roles,
} from "../../core/model.ts";
import { hashSecret, memberTokenPrefix, newId, newSecret } from "../../core/secrets.ts";
import { grantCredits } from "../../store/credits.ts";
import { requireAdmin } from "../auth.ts";
import { type Ctx, conflictOnDuplicate, projectAccess } from "./context.ts";
import { parseInput } from "./validation.ts";

/** A DNS label: the project is the first label of its inbound host. */
export const slugSchema = z.string().regex(PROJECT_SLUG, "must be a DNS label: a-z, 0-9 and '-'");

const createProjectSchema = z.strictObject({
  slug: slugSchema,
  name: z.string().trim().min(1).max(200),
  plan: z.enum(plans).default("free"),
  ownerName: z.string().trim().min(1).max(200).default("owner"),
});

const addMemberSchema = z.strictObject({
  name: z.string().trim().min(1).max(200),
  role: z.enum(roles),
});

const ttlDays = z.number().int().min(1).max(3650).nullable();
const policySchema = z.strictObject({
  defaultKeyTtlDays: ttlDays,
  maxKeyTtlDays: ttlDays,
  editorsMayCreateNonExpiringKeys: z.boolean(),
});

export interface ProjectView {
  slug: string;
  name: string;
  plan: Plan;
  createdAt: Date;
}

export interface MemberView {
  id: string;
  name: string;
  role: Role;
  createdAt: Date;
}

export async function createProject(ctx: Ctx, input: unknown) {
  requireAdmin(ctx.caller);
  const { slug, name, plan, ownerName } = parseInput(createProjectSchema, input);
  const ownerToken = newSecret(memberTokenPrefix);
  const tokenHash = await hashSecret(ownerToken);
  return ctx.sql
    .begin(async (tx) => {
      const projectId = newId("prj");
      const [project] = await tx<ProjectView[]>`
        insert into projects (id, slug, name, plan) values (${projectId}, ${slug}, ${name}, ${plan})
        returning slug, name, plan, created_at`;
      const [owner] = await tx<MemberView[]>`
        insert into members (id, project_id, name, role, token_hash)
        values (${newId("mem")}, ${projectId}, ${ownerName}, 'owner', ${tokenHash})
        returning id, name, role, created_at`;
      for (const pool of keyModes) {
        if (ctx.initialCredits > 0) await grantCredits(tx, projectId, pool, ctx.initialCredits);
      }
      return { project: project as ProjectView, owner: owner as MemberView, ownerToken };
    })
    .catch(conflictOnDuplicate(`a project '${slug}' already exists`));
}

/** A project with where it is reached: the panel builds example requests and links from these. */
export interface ProjectDetail extends ProjectView {
  /** "{scheme}://{slug}.{edge domain}"; an endpoint is "{inboundUrl}/{line}/{endpoint}". */
  inboundUrl: string;
  /** The Temporal UI's workflow list; a request's workflow is "{workflowsUrl}/{requestId}". */
  workflowsUrl: string;
  /** Why queued deliveries are not being taken (no worker); empty while they are. */
  deliveryWarning: string;
}

export async function getProject(ctx: Ctx, slug: string): Promise<ProjectDetail> {
  const access = await projectAccess(ctx, slug);
  const [project] = await ctx.sql<ProjectView[]>`
    select slug, name, plan, created_at from projects where id = ${access.projectId}`;
  if (!project) throw new RelayError("not_found", `no project '${slug}'`);
  const edge = ctx.links.edgeBaseUrl;
  // Temporal not answering is no reason to fail the page; its own pages say so.
  const queue = await ctx.taskQueue().catch(() => null);
  return {
    ...project,
    inboundUrl: `${edge.protocol}//${project.slug}.${edge.host}`,
    workflowsUrl: ctx.links.workflowsUrl,
    deliveryWarning: queue?.problem && queue.backlogCount > 0 ? queue.problem : "",
  };
}

export interface Membership {
  project: ProjectView;
  role: Role;
  /** Empty for the admin token. */
  memberName: string;
}

/** The projects the caller may manage: a member's own, or every project for the admin. */
export async function listProjects(ctx: Ctx): Promise<Membership[]> {
  const { caller } = ctx;
  if (caller.kind === "anonymous") {
    throw new RelayError("unauthenticated", "missing or invalid token");
  }
  if (caller.kind === "edge") throw new RelayError("forbidden", "edges cannot manage projects");
  if (caller.kind === "admin") {
    const all = await ctx.sql<ProjectView[]>`
      select slug, name, plan, created_at from projects order by slug`;
    return all.map((project) => ({ project, role: "owner", memberName: "" }));
  }
  const rows = await ctx.sql<(ProjectView & { role: Role; memberName: string })[]>`
    select p.slug, p.name, p.plan, p.created_at, m.role, m.name as member_name
    from members m join projects p on p.id = m.project_id
    where m.id = ${caller.memberId}`;
  return rows.map(({ role, memberName, ...project }) => ({ project, role, memberName }));
}

export async function addMember(ctx: Ctx, slug: string, input: unknown) {
  const access = await projectAccess(ctx, slug, "owner");
  const { name, role } = parseInput(addMemberSchema, input);
  const token = newSecret(memberTokenPrefix);
  const [member] = await ctx.sql<MemberView[]>`
    insert into members (id, project_id, name, role, token_hash)
    values (${newId("mem")}, ${access.projectId}, ${name}, ${role}, ${await hashSecret(token)})
    returning id, name, role, created_at`;
  return { member: member as MemberView, token };
}

export async function listMembers(ctx: Ctx, slug: string): Promise<MemberView[]> {
  const access = await projectAccess(ctx, slug);
  return ctx.sql<MemberView[]>`
    select id, name, role, created_at from members
    where project_id = ${access.projectId} order by created_at, id`;
}

/** Owner only; an owner cannot remove themselves, so a project always keeps one. */
export async function removeMember(ctx: Ctx, slug: string, memberId: string): Promise<void> {
  const access = await projectAccess(ctx, slug, "owner");
  if (ctx.caller.kind === "member" && ctx.caller.memberId === memberId) {
    throw new RelayError("conflict", "an owner cannot remove themselves");
  }
  const removed = await ctx.sql`
    delete from members where id = ${memberId} and project_id = ${access.projectId}`;
  if (removed.count === 0) throw new RelayError("not_found", `no member '${memberId}'`);
}

export async function getPolicy(ctx: Ctx, slug: string): Promise<Policy> {
  const access = await projectAccess(ctx, slug);
  return readPolicy(ctx, access.projectId);
}

export async function updatePolicy(ctx: Ctx, slug: string, input: unknown): Promise<Policy> {
  const access = await projectAccess(ctx, slug, "owner");
  const policy = parseInput(policySchema, input);
  await ctx.sql`
    update projects set
      default_key_ttl_days = ${policy.defaultKeyTtlDays},
      max_key_ttl_days = ${policy.maxKeyTtlDays},
      editors_may_create_non_expiring_keys = ${policy.editorsMayCreateNonExpiringKeys}
    where id = ${access.projectId}`;
  return policy;
}

export async function readPolicy(ctx: Pick<Ctx, "sql">, projectId: string): Promise<Policy> {
  const [policy] = await ctx.sql<Policy[]>`
    select default_key_ttl_days, max_key_ttl_days, editors_may_create_non_expiring_keys
    from projects where id = ${projectId}`;
  if (!policy) throw new RelayError("not_found", "no such project");
  return policy;
}
