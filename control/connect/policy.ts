import type { ConnectRouter } from "@connectrpc/connect";
import { PolicyService } from "../../gen/relay/v1/projects_pb.ts";
import * as projects from "../api/projects.ts";
import type { ContextOf } from "./caller.ts";
import { nullsToUndefined } from "./convert.ts";

export function policyService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(PolicyService, {
    async getPolicy(req, h) {
      const policy = await projects.getPolicy(ctxOf(h), req.project);
      return { policy: nullsToUndefined(policy) };
    },
    async updatePolicy(req, h) {
      const policy = await projects.updatePolicy(ctxOf(h), req.project, {
        defaultKeyTtlDays: req.policy?.defaultKeyTtlDays ?? null,
        maxKeyTtlDays: req.policy?.maxKeyTtlDays ?? null,
        editorsMayCreateNonExpiringKeys: req.policy?.editorsMayCreateNonExpiringKeys ?? false,
      });
      return { policy: nullsToUndefined(policy) };
    },
  });
}
