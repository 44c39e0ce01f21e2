import type { ConnectRouter } from "@connectrpc/connect";
import { projectCaps } from "../../core/limits.ts";
import { plans, roles } from "../../core/model.ts";
import { ProjectService } from "../../gen/relay/v1/projects_pb.ts";
import * as erase from "../api/erase.ts";
import * as limits from "../api/limits.ts";
import * as projects from "../api/projects.ts";
import type { ContextOf } from "./caller.ts";
import { fromEnum, memberOut, projectOut, toEnum } from "./convert.ts";

export function projectService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(ProjectService, {
    async createProject(req, h) {
      const plan = fromEnum(plans, req.plan);
      const created = await projects.createProject(ctxOf(h), {
        slug: req.slug,
        name: req.name,
        ...(plan && { plan }),
        ...(req.ownerName && { ownerName: req.ownerName }),
      });
      return {
        project: projectOut(created.project),
        owner: memberOut(created.owner),
        ownerToken: created.ownerToken,
      };
    },
    async getProject(req, h) {
      const { inboundUrl, workflowsUrl, deliveryWarning, ...project } = await projects.getProject(
        ctxOf(h),
        req.project,
      );
      return { project: projectOut(project), inboundUrl, workflowsUrl, deliveryWarning };
    },
    async deleteProject(req, h) {
      await erase.deleteProject(ctxOf(h), req.project);
      return {};
    },
    async getProjectLimits(req, h) {
      return { limits: limitsOut(await limits.getLimits(ctxOf(h), req.project)) };
    },
    async setProjectLimits(req, h) {
      const overrides = {
        ...Object.fromEntries(projectCaps.map((cap) => [cap, req.limits?.[cap]])),
        rateLimit: rateLimitIn(req.limits?.rateLimit),
      };
      const set = await limits.setLimits(ctxOf(h), req.project, overrides);
      return { limits: limitsOut(set) };
    },
    async listProjects(_req, h) {
      const { projects: memberships, callerIsAdmin } = await projects.listProjects(ctxOf(h));
      return {
        callerIsAdmin,
        projects: memberships.map((m) => ({
          project: projectOut(m.project),
          role: toEnum(roles, m.role),
          memberName: m.memberName,
          memberId: m.memberId,
        })),
      };
    },
  });
}

function limitsOut({ rateLimit, ...caps }: limits.ProjectLimitsView) {
  return {
    ...Object.fromEntries(
      Object.entries(caps).map(([cap, { limit, used }]) => [cap, { limit, used: BigInt(used) }]),
    ),
    rateLimit,
  };
}

/** A message's rate limit as the REST body has it (validated there): unset, the plan's. */
function rateLimitIn(rate: { requestsPerSecond: number; burst: number } | undefined) {
  return rate ? { requestsPerSecond: rate.requestsPerSecond, burst: rate.burst } : null;
}
