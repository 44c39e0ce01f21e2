/**
 * The Transformations route (trying one before it is saved): its REST contract beside the
 * operation it calls, as control/connect/transforms.ts serves the same operation over Connect.
 */
import { TRANSFORM_LIMITS } from "../../core/transform.ts";
import * as transforms from "../api/transforms.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const transformRoutes: Route[] = tagged("Transformations", [
  route(
    "POST",
    `${base}/transforms/try`,
    {
      operationId: "tryTransform",
      summary: "Run a transformation on a call, as a delivery would; nothing is sent or saved",
      description: `In the sandbox deliveries use, with the same bounds (${TRANSFORM_LIMITS.runMs} ms, ${TRANSFORM_LIMITS.memoryBytes / 1024 / 1024} MiB). A run that fails (a throw, a syntax error, past its time, a request that is not one) answers 200 with \`outcome: "error"\`; a source that is empty or over ${TRANSFORM_LIMITS.sourceBytes / 1024} KiB, or a malformed call, is 400.`,
      access: "editor",
      body: transforms.tryTransformBody,
      example: {
        transform: "(request) => ({ ...request, body: { order: request.body } })",
        request: {
          path: "/hooks/orders",
          query: {},
          headers: { "content-type": "application/json" },
          body: { id: "order-1", status: "paid" },
        },
      },
      answer: transforms.triedTransform,
      // Nothing is made: the answer is the run's.
      status: 200,
    },
    ({ ctx, params, body }) => transforms.tryTransform(ctx, p(params).project, body),
  ),
]);
