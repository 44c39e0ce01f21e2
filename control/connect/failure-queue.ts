import type { ConnectRouter } from "@connectrpc/connect";
import { FailureQueueService } from "../../gen/relay/v1/recoveries_pb.ts";
import * as failures from "../api/failures.ts";
import * as replay from "../api/replay.ts";
import type { ContextOf } from "./caller.ts";
import { filterIn, pageOut, pageQuery, requestOut } from "./convert.ts";
import { recoveryOut } from "./recoveries.ts";

export function failureQueueService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(FailureQueueService, {
    async listFailures(req, h) {
      return pageOut(await failures.listFailures(ctxOf(h), req.project, pageQuery(req)));
    },
    async replayRequest(req, h) {
      return {
        request: requestOut(await replay.replayRequest(ctxOf(h), req.project, req.requestId)),
      };
    },
    async replayFailures(req, h) {
      const replayed = await failures.replayFailures(ctxOf(h), req.project, filterIn(req.filter));
      return { recovery: recoveryOut(replayed) };
    },
  });
}
