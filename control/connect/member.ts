import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { roles } from "../../core/model.ts";
import { MemberService } from "../../gen/relay/v1/projects_pb.ts";
import * as projects from "../api/projects.ts";
import type { ContextOf } from "./caller.ts";
import { fromEnum, memberOut } from "./convert.ts";

export function memberService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(MemberService, {
    async addMember(req, h) {
      const added = await projects.addMember(ctxOf(h), req.project, {
        name: req.name,
        role: fromEnum(roles, req.role),
        expiresAt: req.expiresAt ? timestampDate(req.expiresAt).toISOString() : null,
      });
      return { member: memberOut(added.member), token: added.token };
    },
    async listMembers(req, h) {
      return { members: (await projects.listMembers(ctxOf(h), req.project)).map(memberOut) };
    },
    async removeMember(req, h) {
      await projects.removeMember(ctxOf(h), req.project, req.memberId);
      return {};
    },
    async rotateMemberToken(req, h) {
      const rotated = await projects.rotateMemberToken(ctxOf(h), req.project, req.memberId);
      return { member: memberOut(rotated.member), token: rotated.token };
    },
  });
}
