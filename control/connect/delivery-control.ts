import type { ConnectRouter } from "@connectrpc/connect";
import { type CircuitState, DeliveryControlService } from "../../gen/relay/v1/circuits_pb.ts";
import * as circuits from "../api/circuits.ts";
import type { ContextOf } from "./caller.ts";
import { optionalTs, toEnum, ts } from "./convert.ts";

const circuitStates = ["closed", "open", "disabled"] as const;

const circuitsOut = ({ targets }: { targets: circuits.TargetCircuit[] }) => ({
  targets: targets.map((t) => ({
    ...t,
    state: toEnum(circuitStates, t.state) as CircuitState,
    openedAt: optionalTs(t.openedAt),
    events: t.events.map((e) => ({ event: e.event, at: ts(e.at) })),
  })),
});

export function deliveryControlService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(DeliveryControlService, {
    async getCircuits(req, h) {
      return circuitsOut(await circuits.getCircuits(ctxOf(h), req.project, req));
    },
    async pauseEndpoint(req, h) {
      return circuitsOut(await circuits.pauseEndpoint(ctxOf(h), req.project, req, true));
    },
    async resumeEndpoint(req, h) {
      return circuitsOut(await circuits.pauseEndpoint(ctxOf(h), req.project, req, false));
    },
    async pauseTarget(req, h) {
      return circuitsOut(await circuits.pauseTarget(ctxOf(h), req.project, req, req.target, true));
    },
    async resumeTarget(req, h) {
      return circuitsOut(await circuits.pauseTarget(ctxOf(h), req.project, req, req.target, false));
    },
    async enableTarget(req, h) {
      return circuitsOut(await circuits.enableTarget(ctxOf(h), req.project, req, req.target));
    },
  });
}
