import type { ConnectRouter } from "@connectrpc/connect";
import { keyModes } from "../../core/model.ts";
import { UsageService } from "../../gen/relay/v1/usage_pb.ts";
import * as credits from "../api/credits.ts";
import * as deliveries from "../api/deliveries.ts";
import type { ContextOf } from "./caller.ts";
import { fromEnum, ts, usageOut } from "./convert.ts";

export function usageService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(UsageService, {
    async getUsage(req, h) {
      return usageOut(await credits.getUsage(ctxOf(h), req.project));
    },
    async addCredits(req, h) {
      const usage = await credits.addCredits(ctxOf(h), req.project, {
        pool: fromEnum(keyModes, req.pool),
        amount: Number(req.amount),
      });
      return { usage: usageOut(usage) };
    },
    async getDeliveryHistory(req, h) {
      const hours = await deliveries.deliveryHistory(ctxOf(h), req.project, {
        hours: req.hours,
      });
      return { hours: hours.map((entry) => ({ ...entry, hour: ts(entry.hour) })) };
    },
  });
}
