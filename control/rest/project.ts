/**
 * The Projects routes (creating and reading projects, and their caps): each REST contract beside
 * the operation it calls, as control/connect/project.ts serves the same operations over Connect.
 */
import * as answers from "../api/answers.ts";
import * as erase from "../api/erase.ts";
import * as limits from "../api/limits.ts";
import * as projects from "../api/projects.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const projectRoutes: Route[] = tagged("Projects", [
  route(
    "POST",
    "/projects",
    {
      operationId: "createProject",
      summary: "Create a project with its first owner",
      access: "admin",
      body: projects.createProjectBody,
      example: { slug: "acme", name: "Acme", plan: "paid" },
      answer: answers.createdProject,
      errors: ["conflict"],
    },
    ({ ctx, body }) => projects.createProject(ctx, body),
  ),
  route(
    "GET",
    "/projects",
    {
      operationId: "listProjects",
      summary: "The projects the caller may manage",
      access: "member",
      answer: answers.projectList,
    },
    ({ ctx }) => projects.listProjects(ctx),
  ),
  route(
    "GET",
    base,
    {
      operationId: "getProject",
      summary: "A project, with where it is reached",
      access: "editor",
      answer: answers.projectDetail,
    },
    ({ ctx, params }) => projects.getProject(ctx, p(params).project),
  ),
  route(
    "DELETE",
    base,
    {
      operationId: "deleteProject",
      summary: "Delete the project and everything it has, its Temporal histories too",
      description:
        "Owners and the admin. Its keys stop working first, on every edge; its Temporal histories are deleted in the background (a batch operation of Temporal's); its slug is not given out again. Nothing of it can be read afterwards.",
      access: "owner",
    },
    ({ ctx, params }) => erase.deleteProject(ctx, p(params).project),
  ),
  route(
    "GET",
    `${base}/limits`,
    {
      operationId: "getProjectLimits",
      summary: "Each of the project's caps and what it uses of it",
      description: "A create that would grow the project past a cap is 409 `limit_exceeded`.",
      access: "editor",
      answer: answers.projectLimits,
    },
    ({ ctx, params }) => limits.getLimits(ctx, p(params).project),
  ),
  route(
    "PUT",
    `${base}/limits`,
    {
      operationId: "setProjectLimits",
      summary: "Set the project's own caps (a cap absent or null is the deployment's default)",
      access: "admin",
      body: limits.limitOverridesBody,
      example: { endpoints: 2000, schemaBytes: 8388608 },
      answer: answers.projectLimits,
    },
    ({ ctx, params, body }) => limits.setLimits(ctx, p(params).project, body),
  ),
]);
