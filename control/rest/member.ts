/**
 * The Members routes (who manages a project, their tokens): each REST contract beside the operation
 * it calls, as control/connect/member.ts serves the same operations over Connect.
 */
import * as answers from "../api/answers.ts";
import * as projects from "../api/projects.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const memberRoutes: Route[] = tagged("Members", [
  route(
    "GET",
    `${base}/members`,
    {
      operationId: "listMembers",
      summary: "The project's members",
      access: "editor",
      answer: answers.memberList,
    },
    ({ ctx, params }) =>
      projects.listMembers(ctx, p(params).project).then((members) => ({ members })),
  ),
  route(
    "POST",
    `${base}/members`,
    {
      operationId: "addMember",
      summary: "Add a member; their token is shown this once",
      access: "owner",
      body: projects.addMemberBody,
      example: { name: "Ada", role: "editor", expiresAt: "2027-01-31T00:00:00Z" },
      answer: answers.addedMember,
      errors: ["limit_exceeded"],
    },
    ({ ctx, params, body }) => projects.addMember(ctx, p(params).project, body),
  ),
  route(
    "POST",
    `${base}/members/:memberId/rotate-token`,
    {
      operationId: "rotateMemberToken",
      summary: "Give a member a new token, shown this once; the old one is refused at once",
      description:
        "A member may rotate its own token, an owner any member's. The expiry stays as it was.",
      access: "editor",
      answer: answers.rotatedMemberToken,
    },
    ({ ctx, params }) => projects.rotateMemberToken(ctx, p(params).project, p(params).memberId),
  ),
  route(
    "DELETE",
    `${base}/members/:memberId`,
    {
      operationId: "removeMember",
      summary: "Remove a member (not yourself, nor the project's last owner)",
      access: "owner",
      errors: ["conflict"],
    },
    ({ ctx, params }) => projects.removeMember(ctx, p(params).project, p(params).memberId),
  ),
]);
