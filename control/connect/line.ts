import type { ConnectRouter } from "@connectrpc/connect";
import { LineService } from "../../gen/relay/v1/routing_pb.ts";
import * as routing from "../api/routing.ts";
import type { ContextOf } from "./caller.ts";
import { ts } from "./convert.ts";

export function lineService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(LineService, {
    async listLines(req, h) {
      const lines = await routing.listLines(ctxOf(h), req.project);
      return { lines: lines.map((l) => ({ ...l, createdAt: ts(l.createdAt) })) };
    },
    async createLine(req, h) {
      const line = await routing.createLine(ctxOf(h), req.project, { key: req.key });
      return { line: { ...line, createdAt: ts(line.createdAt) } };
    },
    async deleteLine(req, h) {
      await routing.deleteLine(ctxOf(h), req.project, req.key);
      return {};
    },
  });
}
