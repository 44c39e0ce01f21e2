import type { ConnectRouter } from "@connectrpc/connect";
import { EndpointService } from "../../gen/relay/v1/routing_pb.ts";
import * as routing from "../api/routing.ts";
import * as signing from "../api/signing.ts";
import type { ContextOf } from "./caller.ts";
import { endpointIn, endpointOut, optionalTs } from "./convert.ts";

export function endpointService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(EndpointService, {
    async listEndpoints(req, h) {
      const endpoints = await routing.listEndpoints(ctxOf(h), req.project, req.line);
      return { endpoints: endpoints.map(endpointOut) };
    },
    async getEndpoint(req, h) {
      const endpoint = await routing.getEndpoint(ctxOf(h), req.project, req.line, req.path);
      return { endpoint: endpointOut(endpoint) };
    },
    async createEndpoint(req, h) {
      const input = endpointIn(req.endpoint);
      const { signingSecret, ...endpoint } = await routing.createEndpoint(
        ctxOf(h),
        req.project,
        req.line,
        input,
      );
      return { endpoint: endpointOut(endpoint), signingSecret };
    },
    async updateEndpoint(req, h) {
      const input = endpointIn(req.endpoint);
      const endpoint = await routing.updateEndpoint(
        ctxOf(h),
        req.project,
        req.line,
        req.path,
        input,
      );
      return { endpoint: endpointOut(endpoint) };
    },
    async deleteEndpoint(req, h) {
      await routing.deleteEndpoint(ctxOf(h), req.project, req.line, req.path);
      return {};
    },
    async rotateSigningSecret(req, h) {
      const rotated = await signing.rotateSigningSecret(ctxOf(h), req.project, req.line, req.path, {
        ...(req.overlapSeconds !== undefined && { overlapSeconds: req.overlapSeconds }),
      });
      return {
        signingSecret: rotated.signingSecret,
        previousExpiresAt: optionalTs(rotated.previousExpiresAt),
      };
    },
  });
}
