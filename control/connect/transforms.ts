/**
 * TransformService: trying a transformation (control/api/transforms.ts) over Connect. A call's
 * body travels as a google.protobuf.Value, converted to and from the JSON value the operation
 * takes and answers.
 */
import { fromJson, toJson } from "@bufbuild/protobuf";
import { type Value, ValueSchema } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter } from "@connectrpc/connect";
import { type TransformCall, TransformService } from "../../gen/relay/v1/transforms_pb.ts";
import * as transforms from "../api/transforms.ts";
import type { ContextOf } from "./caller.ts";

/** A Value with no kind set is no JSON value: left out, for the operation to refuse. */
const jsonOf = (value: Value | undefined) =>
  value?.kind.case === undefined ? undefined : toJson(ValueSchema, value);

const callIn = (call: TransformCall | undefined) =>
  call && { path: call.path, query: call.query, headers: call.headers, body: jsonOf(call.body) };

export function transformService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(TransformService, {
    async tryTransform(req, h) {
      const tried = await transforms.tryTransform(ctxOf(h), req.project, {
        transform: req.transform,
        request: callIn(req.request),
      });
      switch (tried.outcome) {
        case "request": {
          const body = fromJson(ValueSchema, tried.request.body);
          return { outcome: { case: "request", value: { ...tried.request, body } } };
        }
        case "dropped":
          return { outcome: { case: "dropped", value: true } };
        case "error":
          return { outcome: { case: "error", value: tried.error } };
      }
    },
  });
}
