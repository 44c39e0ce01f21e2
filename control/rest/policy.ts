/**
 * The Policy routes (the project's key lifetimes): each REST contract beside the operation it
 * calls, as control/connect/policy.ts serves the same operations over Connect.
 */
import * as projects from "../api/projects.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const policyRoutes: Route[] = tagged("Policy", [
  route(
    "GET",
    `${base}/policy`,
    {
      operationId: "getPolicy",
      summary: "The project's key policy",
      access: "editor",
      answer: projects.policyBody,
    },
    ({ ctx, params }) => projects.getPolicy(ctx, p(params).project),
  ),
  route(
    "PUT",
    `${base}/policy`,
    {
      operationId: "updatePolicy",
      summary: "Set the project's key policy",
      access: "owner",
      body: projects.policyBody,
      example: {
        defaultKeyTtlDays: 90,
        maxKeyTtlDays: 365,
        editorsMayCreateNonExpiringKeys: false,
      },
      answer: projects.policyBody,
    },
    ({ ctx, params, body }) => projects.updatePolicy(ctx, p(params).project, body),
  ),
]);
