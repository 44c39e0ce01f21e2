import type { ConnectRouter } from "@connectrpc/connect";
import { RequestLogService } from "../../gen/relay/v1/requests_pb.ts";
import * as cancel from "../api/cancel.ts";
import type { RetentionView } from "../api/erase.ts";
import * as erase from "../api/erase.ts";
import * as requests from "../api/requests.ts";
import * as sendAgain from "../api/send-again.ts";
import type { ContextOf } from "./caller.ts";
import { bodyIn, pageOut, pageQuery, requestOut } from "./convert.ts";

export function requestLogService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(RequestLogService, {
    async listRequests(req, h) {
      return pageOut(await requests.listRequests(ctxOf(h), req.project, pageQuery(req)));
    },
    async getRequest(req, h) {
      return {
        request: requestOut(await requests.getRequest(ctxOf(h), req.project, req.requestId)),
      };
    },
    async sendAgain(req, h) {
      const body = { body: bodyIn(req.body) };
      return {
        request: requestOut(await sendAgain.sendAgain(ctxOf(h), req.project, req.requestId, body)),
      };
    },
    async cancelRequest(req, h) {
      return {
        request: requestOut(await cancel.cancelRequest(ctxOf(h), req.project, req.requestId)),
      };
    },
    async eraseRequestContent(req, h) {
      return {
        request: requestOut(await erase.eraseRequestContent(ctxOf(h), req.project, req.requestId)),
      };
    },
    async getRetention(req, h) {
      return { retention: retentionOut(await erase.getRetention(ctxOf(h), req.project)) };
    },
    async setRetention(req, h) {
      const body = { retentionDays: req.retentionDays ?? null };
      return { retention: retentionOut(await erase.setRetention(ctxOf(h), req.project, body)) };
    },
  });
}

const retentionOut = (r: RetentionView) => ({
  retentionDays: r.retentionDays ?? undefined,
  maxRetentionDays: r.maxRetentionDays,
});
