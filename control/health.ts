/**
 * grpc.health.v1, so load balancers and `grpc-health-probe` see whether the control plane can
 * serve: SERVING while Postgres answers. The overall status ("") and every served service share
 * it; an unknown service is NOT_FOUND, as the protocol says.
 */

import { setTimeout as sleep } from "node:timers/promises";
import type { DescService } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import {
  Health,
  HealthCheckResponse_ServingStatus as Status,
} from "../gen/grpc/health/v1/health_pb.ts";

const WATCH_INTERVAL_MS = 5000;

export function healthService(
  services: DescService[],
  postgresAnswers: () => Promise<void>,
): ServiceImpl<typeof Health> {
  const known = new Set(["", Health.typeName, ...services.map((s) => s.typeName)]);
  const status = async (service: string): Promise<Status> => {
    if (!known.has(service)) throw new ConnectError(`unknown service ${service}`, Code.NotFound);
    return postgresAnswers().then(
      () => Status.SERVING,
      () => Status.NOT_SERVING,
    );
  };
  return {
    async check(req) {
      return { status: await status(req.service) };
    },
    /** Sends the status, then each change, until the caller leaves. */
    async *watch(req, context) {
      let last: Status | undefined;
      while (!context.signal.aborted) {
        const now = await status(req.service);
        if (now !== last) yield { status: now };
        last = now;
        await sleep(WATCH_INTERVAL_MS, undefined, { signal: context.signal }).catch(() => {});
      }
    },
  };
}
