/** Projects, members and the key policy. */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import { memberTokenExpiry } from "../../core/members.ts";
import { type Policy, PROJECT_SLUG, plans, type Role, roles } from "../../core/model.ts";
import { hashSecret, memberTokenPrefix, newSecret } from "../../core/secrets.ts";
import { claimRoom } from "../../store/limits.ts";
import type { MemberView } from "../../store/members.ts";
import * as members from "../../store/members.ts";
import { wasDeleted } from "../../store/project-erase.ts";
import type { ProjectView } from "../../store/projects.ts";
import * as projects from "../../store/projects.ts";
import { requireAdmin } from "../auth.ts";
import { type Ctx, conflictOnDuplicate, projectAccess } from "./context.ts";
import { capsOf } from "./limits.ts";
import { displayName, parseInput } from "./validation.ts";

/** A DNS label: the project is the first label of its inbound host. */
export const slugSchema = z.string().regex(PROJECT_SLUG, "must be a DNS label: a-z, 0-9 and '-'");

export const createProjectBody = z.strictObject({
  slug: slugSchema,
  name: displayName,
  plan: z.enum(plans).default("free"),
  ownerName: displayName.default("owner"),
});

export const addMemberBody = z.strictObject({
  name: displayName,
  role: z.enum(roles),
  expiresAt: z.iso
    .datetime({ offset: true })
    .nullable()
    .default(null)
    .describe("When the token stops working: a future time at most 366 days ahead; null, never"),
});

const ttlDays = z.number().int().min(1).max(3650).nullable();
export const policyBody = z.strictObject({
  defaultKeyTtlDays: ttlDays,
  maxKeyTtlDays: ttlDays,
  editorsMayCreateNonExpiringKeys: z.boolean(),
});

export type { MemberView } from "../../store/members.ts";
export type { ProjectView } from "../../store/projects.ts";

export async function createProject(ctx: Ctx, input: unknown) {
  requireAdmin(ctx.caller);
  const { slug, name, plan, ownerName } = parseInput(createProjectBody, input);
  if (await wasDeleted(ctx.sql, slug)) {
    throw new RelayError(
      "conflict",
      `a project '${slug}' was deleted: its slug is not given out again`,
    );
  }
  const { token: ownerToken, tokenHash } = await newMemberToken();
  const created = await projects
    .createProject(
      ctx.sql,
      { slug, name, plan },
      { name: ownerName, tokenHash },
      ctx.initialCredits,
    )
    .catch(conflictOnDuplicate(`a project '${slug}' already exists`));
  return { ...created, ownerToken };
}

/** A project with where it is reached: the panel builds example requests and links from these. */
export interface ProjectDetail extends ProjectView {
  /** "{scheme}://{slug}.{edge domain}"; an endpoint is "{inboundUrl}/{line}/{endpoint}". */
  inboundUrl: string;
  /**
   * The Temporal UI's workflow list; a request's workflows (its own, and its batch's) are the list
   * of that query (panel/src/temporal-ui.ts). Empty for a member unless the deployment declares
   * its UI member-safe.
   */
  workflowsUrl: string;
  /** Why queued deliveries are not being taken (no worker); empty while they are. */
  deliveryWarning: string;
}

export async function getProject(ctx: Ctx, slug: string): Promise<ProjectDetail> {
  const access = await projectAccess(ctx, slug);
  const project = await projects.projectById(ctx.sql, access.projectId);
  if (!project) throw new RelayError("not_found", `no project '${slug}'`);
  const edge = ctx.links.edgeBaseUrl;
  // Temporal not answering is no reason to fail the page; its own pages say so.
  const queue = await ctx.taskQueue().catch(() => null);
  return {
    ...project,
    inboundUrl: `${edge.protocol}//${project.slug}.${edge.host}`,
    workflowsUrl:
      ctx.caller.kind === "admin" || ctx.links.temporalUiMemberSafe ? ctx.links.workflowsUrl : "",
    deliveryWarning: queue?.problem && queue.backlogCount > 0 ? queue.problem : "",
  };
}

export interface Membership {
  project: ProjectView;
  role: Role;
  /** Empty for the admin token. */
  memberName: string;
  /** Empty for the admin token. */
  memberId: string;
}

/**
 * The projects the caller may manage: a member's own, or every project for the admin, and
 * whether the caller is the admin (the panel refuses the admin token by it).
 */
export async function listProjects(
  ctx: Ctx,
): Promise<{ projects: Membership[]; callerIsAdmin: boolean }> {
  const { caller } = ctx;
  if (caller.kind === "anonymous") {
    throw new RelayError("unauthenticated", "missing or invalid token");
  }
  if (caller.kind === "edge") throw new RelayError("forbidden", "edges cannot manage projects");
  if (caller.kind === "admin") {
    const all = await projects.allProjects(ctx.sql);
    return {
      projects: all.map((project) => ({ project, role: "owner", memberName: "", memberId: "" })),
      callerIsAdmin: true,
    };
  }
  const rows = await projects.membershipsOf(ctx.sql, caller.memberId);
  return {
    projects: rows.map(({ role, memberName, memberId, ...project }) => ({
      project,
      role,
      memberName,
      memberId,
    })),
    callerIsAdmin: false,
  };
}

export async function addMember(ctx: Ctx, slug: string, input: unknown) {
  const access = await projectAccess(ctx, slug, "owner");
  const body = parseInput(addMemberBody, input);
  const expiresAt = memberTokenExpiry(body.expiresAt ? new Date(body.expiresAt) : null, ctx.now());
  const { token, tokenHash } = await newMemberToken();
  const member = await ctx.sql.begin(async (tx) => {
    await claimRoom(tx, access.projectId, capsOf(ctx), { members: 1 });
    return members.insertMember(tx, {
      projectId: access.projectId,
      name: body.name,
      role: body.role,
      tokenHash,
      expiresAt,
    });
  });
  return { member, token };
}

async function newMemberToken() {
  const token = newSecret(memberTokenPrefix);
  return { token, tokenHash: await hashSecret(token) };
}

/**
 * A new token for the member, shown this once; the old one is refused from now on. A member may
 * rotate its own token, an owner (or the admin) any member's of the project.
 */
export async function rotateMemberToken(ctx: Ctx, slug: string, memberId: string) {
  const access = await projectAccess(ctx, slug);
  const own = ctx.caller.kind === "member" && ctx.caller.memberId === memberId;
  if (!own && access.role !== "owner") {
    throw new RelayError("forbidden", "only owners may rotate another member's token");
  }
  const { token, tokenHash } = await newMemberToken();
  const member = await members.replaceTokenHash(ctx.sql, access.projectId, memberId, tokenHash);
  if (!member) throw new RelayError("not_found", `no member '${memberId}'`);
  return { member, token };
}

export async function listMembers(ctx: Ctx, slug: string): Promise<MemberView[]> {
  const access = await projectAccess(ctx, slug);
  return members.listMembers(ctx.sql, access.projectId);
}

/**
 * Owner only; an owner cannot remove themselves, and a project keeps at least one owner whose
 * token never expires.
 */
export async function removeMember(ctx: Ctx, slug: string, memberId: string): Promise<void> {
  const access = await projectAccess(ctx, slug, "owner");
  if (ctx.caller.kind === "member" && ctx.caller.memberId === memberId) {
    throw new RelayError("conflict", "an owner cannot remove themselves");
  }
  const outcome = await members.deleteMember(ctx.sql, access.projectId, memberId, ctx.now());
  if (outcome === "not_found") throw new RelayError("not_found", `no member '${memberId}'`);
  if (outcome === "last_owner") {
    throw new RelayError("conflict", "a project keeps at least one owner");
  }
}

export async function getPolicy(ctx: Ctx, slug: string): Promise<Policy> {
  const access = await projectAccess(ctx, slug);
  return readPolicy(ctx, access.projectId);
}

export async function updatePolicy(ctx: Ctx, slug: string, input: unknown): Promise<Policy> {
  const access = await projectAccess(ctx, slug, "owner");
  const policy = parseInput(policyBody, input);
  await projects.updatePolicy(ctx.sql, access.projectId, policy);
  return policy;
}

export async function readPolicy(ctx: Pick<Ctx, "sql">, projectId: string): Promise<Policy> {
  const policy = await projects.projectPolicy(ctx.sql, projectId);
  if (!policy) throw new RelayError("not_found", "no such project");
  return policy;
}
