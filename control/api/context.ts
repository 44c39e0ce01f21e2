/** What every control-plane operation receives: the database, the clock, and the caller. */

import type { Client } from "@temporalio/client";
import { RelayError } from "../../core/errors.ts";
import type { ProjectLimits } from "../../core/limits.ts";
import type { Plan, Role } from "../../core/model.ts";
import type { PayloadCipher, PayloadKey } from "../../core/payload-codec.ts";
import type { SavedTargetRules } from "../../core/targets.ts";
import type { TaskQueueHealth } from "../../core/task-queue.ts";
import type { TransformPool } from "../../core/transform-pool.ts";
import type { Sql } from "../../store/db.ts";
import { isUniqueViolation } from "../../store/errors.ts";
import { projectBySlug } from "../../store/projects.ts";
import type { PlanCaps } from "../../store/waiting.ts";
import type { Caller } from "../auth.ts";

export interface Deps {
  sql: Sql;
  now: () => Date;
  /** AES-256-GCM key that opens auto-rotated successors. */
  sealingKey: CryptoKey;
  /** The payload codec's keys, newest first, for the edges (core/payload-codec.ts). */
  payloadKeys: PayloadKey[];
  /** The key of the ids derived from callers' values, for the edges (core/id-digest.ts; empty: unkeyed). */
  idKey: Uint8Array<ArrayBuffer>;
  /** Those keys imported once: what opens a start kept for the sweep (a read by request id). */
  payloadCipher: PayloadCipher;
  /** The edges' cap on an inbound body (RELAY_MAX_BODY_BYTES): a body sent again keeps to it. */
  maxBodyBytes: number;
  /** Credits a new project starts with in each metered pool. */
  initialCredits: number;
  /** The deployment's per-project caps; a project's overrides win (store/limits.ts). */
  projectLimits: ProjectLimits;
  /** Each plan's cap on a project's scheduled and held deliveries. */
  waitingCaps: PlanCaps;
  /** Where endpoint targets may point (never the relay itself; private only in dev stacks). */
  targetRules: SavedTargetRules;
  /** A Temporal client, connected on first use (replays, on-demand rotation). */
  temporal: () => Promise<Client>;
  /** Sandbox threads: a saved transformation is checked there, and tried on a logged request. */
  transforms: Pick<TransformPool, "run" | "check">;
  /** Whether a worker takes Relay's tasks (cached a few seconds). */
  taskQueue: () => Promise<TaskQueueHealth>;
  /** Where people reach this deployment; the panel links to these. */
  links: DeploymentLinks;
}

export interface DeploymentLinks {
  /** "{scheme}://{edge domain}": a project's calls go to its slug under this host. */
  edgeBaseUrl: URL;
  /** The Temporal UI's workflow list for the relay's namespace. */
  workflowsUrl: string;
  /**
   * Whether members may be linked there too (RELAY_TEMPORAL_UI_MEMBER_SAFE): the UI shows every
   * project's workflows unless the deployment put a login and per-project views before it.
   */
  temporalUiMemberSafe: boolean;
}

export interface Ctx extends Deps {
  caller: Caller;
}

export interface ProjectAccess {
  projectId: string;
  slug: string;
  plan: Plan;
  /** The admin acts as an owner of every project. */
  role: Role;
}

/**
 * The project `slug` as the caller may use it. A member of another project and an unknown slug
 * both get 404, so a token never tells which projects exist.
 */
export async function projectAccess(
  ctx: Ctx,
  slug: string,
  needs: Role = "editor",
): Promise<ProjectAccess> {
  const { caller } = ctx;
  if (caller.kind === "anonymous") {
    throw new RelayError("unauthenticated", "missing or invalid token");
  }
  if (caller.kind === "edge") throw new RelayError("forbidden", "edges cannot manage projects");
  const project = await projectBySlug(ctx.sql, slug);
  if (!project || (caller.kind === "member" && caller.projectId !== project.id)) {
    throw new RelayError("not_found", `no project '${slug}'`);
  }
  const role = caller.kind === "admin" ? "owner" : caller.role;
  if (needs === "owner" && role !== "owner") {
    throw new RelayError("forbidden", "only owners may do this");
  }
  return { projectId: project.id, slug: project.slug, plan: project.plan, role };
}

/** Unique violations become a 409 with a message the caller can act on. */
export function conflictOnDuplicate(message: string) {
  return (cause: unknown): never => {
    if (isUniqueViolation(cause)) throw new RelayError("conflict", message);
    throw cause;
  };
}
