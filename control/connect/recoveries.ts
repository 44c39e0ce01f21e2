import type { ConnectRouter } from "@connectrpc/connect";
import { requestStatuses } from "../../core/model.ts";
import { recoveryStates } from "../../core/recoveries.ts";
import { type RecoveryFilter, RecoveryService } from "../../gen/relay/v1/recoveries_pb.ts";
import type { RecoveryView } from "../api/recoveries.ts";
import * as recoveries from "../api/recoveries.ts";
import type { ContextOf } from "./caller.ts";
import { fromEnum, isoOf, optionalTs, toEnum, ts } from "./convert.ts";

export function recoveryService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(RecoveryService, {
    async startRecovery(req, h) {
      const body = { ...recoveryFilterIn(req.filter), dryRun: req.dryRun };
      const started = await recoveries.startRecovery(ctxOf(h), req.project, body);
      return "recoveryId" in started
        ? { result: { case: "recovery", value: recoveryOut(started) } }
        : { result: { case: "plan", value: { ...started, credits: BigInt(started.credits) } } };
    },
    async getRecovery(req, h) {
      return {
        recovery: recoveryOut(await recoveries.getRecovery(ctxOf(h), req.project, req.recoveryId)),
      };
    },
    async listRecoveries(req, h) {
      const list = await recoveries.listRecoveries(ctxOf(h), req.project);
      return { recoveries: list.recoveries.map(recoveryOut) };
    },
    async cancelRecovery(req, h) {
      const cancelled = await recoveries.cancelRecovery(ctxOf(h), req.project, req.recoveryId);
      return { recovery: recoveryOut(cancelled) };
    },
  });
}

const recoveryFilterIn = (filter: RecoveryFilter | undefined) => ({
  status: filter?.status ? fromEnum(requestStatuses, filter.status) : undefined,
  endpoint: filter?.endpoint,
  target: filter?.target,
  since: isoOf(filter?.since),
  until: isoOf(filter?.until),
  requestId: filter?.requestId,
  idempotencyKey: filter?.idempotencyKey,
  targetStatus: filter?.targetStatus,
});

export function recoveryOut({ filter, ...job }: RecoveryView) {
  return {
    ...job,
    ...filter,
    state: toEnum(recoveryStates, job.state),
    statuses: filter.statuses.map((s) => toEnum(requestStatuses, s)),
    since: filter.since ? ts(new Date(filter.since)) : undefined,
    until: filter.until ? ts(new Date(filter.until)) : undefined,
    error: job.error ?? undefined,
    credits: BigInt(job.credits),
    createdAt: ts(job.createdAt),
    updatedAt: ts(job.updatedAt),
    finishedAt: optionalTs(job.finishedAt),
  };
}
