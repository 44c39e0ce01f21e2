/**
 * The Usage routes (credits and delivery history): each REST contract beside the operation it
 * calls, as control/connect/usage.ts serves the same operations over Connect.
 */
import * as answers from "../api/answers.ts";
import * as credits from "../api/credits.ts";
import * as deliveries from "../api/deliveries.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const usageRoutes: Route[] = tagged("Usage", [
  route(
    "GET",
    `${base}/usage`,
    {
      operationId: "getUsage",
      summary: "Credits used and remaining in each pool",
      access: "editor",
      answer: answers.usage,
    },
    ({ ctx, params }) => credits.getUsage(ctx, p(params).project),
  ),
  route(
    "GET",
    `${base}/usage/deliveries`,
    {
      operationId: "getDeliveryHistory",
      summary: "Deliveries and failed attempts per hour, oldest first",
      access: "editor",
      query: deliveries.deliveryHistoryQuery,
      answer: answers.deliveryHistory,
    },
    ({ ctx, params, query }) =>
      deliveries.deliveryHistory(ctx, p(params).project, query).then((hours) => ({ hours })),
  ),
  route(
    "POST",
    `${base}/credits`,
    {
      operationId: "addCredits",
      summary: "Add credits to a pool",
      access: "admin",
      body: credits.addCreditsBody,
      example: { pool: "live", amount: 5000 },
      answer: answers.usage,
      status: 200,
    },
    ({ ctx, params, body }) => credits.addCredits(ctx, p(params).project, body),
  ),
]);
