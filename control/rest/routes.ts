/**
 * The route table: every resource's routes, in the document's order (the router tries them in
 * this order too), and the route that serves the OpenAPI document the table makes.
 */
import { type OpenApiDocument, openApiAnswer, openApiDocument } from "../openapi.ts";
import { type Route, route, tagged } from "./contract.ts";
import { deliveryControlRoutes } from "./delivery-control.ts";
import { devClockRoutes } from "./dev-clock.ts";
import { endpointRoutes } from "./endpoint.ts";
import { failureQueueRoutes } from "./failure-queue.ts";
import { keyRoutes } from "./key.ts";
import { lineRoutes } from "./line.ts";
import { memberRoutes } from "./member.ts";
import { notificationRoutes } from "./notifications.ts";
import { policyRoutes } from "./policy.ts";
import { projectRoutes } from "./project.ts";
import { recoveryRoutes } from "./recoveries.ts";
import { requestLogRoutes } from "./request-log.ts";
import { scheduleRoutes } from "./schedules.ts";
import { transformRoutes } from "./transforms.ts";
import { usageRoutes } from "./usage.ts";

export const routes: Route[] = [
  ...projectRoutes,
  ...memberRoutes,
  ...policyRoutes,
  ...notificationRoutes,
  ...lineRoutes,
  ...endpointRoutes,
  ...transformRoutes,
  ...deliveryControlRoutes,
  ...keyRoutes,
  ...usageRoutes,
  ...failureQueueRoutes,
  ...recoveryRoutes,
  ...scheduleRoutes,
  ...requestLogRoutes,
  ...devClockRoutes,
  ...tagged("Document", [
    route(
      "GET",
      "/openapi.json",
      {
        operationId: "getOpenApiDocument",
        summary: "This document",
        access: "public",
        answer: openApiAnswer,
      },
      async () => document(),
    ),
  ]),
];

/** Built on its first request: the routes are all there by then. */
let built: OpenApiDocument | undefined;
const document = () => {
  built ??= openApiDocument(routes);
  return built;
};
