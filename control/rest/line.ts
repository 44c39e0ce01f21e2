/**
 * The Lines routes: each REST contract beside the operation it calls, as control/connect/line.ts
 * serves the same operations over Connect.
 */
import * as answers from "../api/answers.ts";
import * as routing from "../api/routing.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const lineRoutes: Route[] = tagged("Lines", [
  route(
    "GET",
    `${base}/lines`,
    {
      operationId: "listLines",
      summary: "The project's lines",
      access: "editor",
      answer: answers.lineList,
    },
    ({ ctx, params }) => routing.listLines(ctx, p(params).project).then((lines) => ({ lines })),
  ),
  route(
    "POST",
    `${base}/lines`,
    {
      operationId: "createLine",
      summary: "Create a line: the first path segment of its endpoints' inbound URLs",
      access: "editor",
      body: routing.createLineBody,
      example: { key: "v2" },
      answer: answers.line,
      errors: ["conflict", "limit_exceeded"],
    },
    ({ ctx, params, body }) => routing.createLine(ctx, p(params).project, body),
  ),
  route(
    "DELETE",
    `${base}/lines/:line`,
    {
      operationId: "deleteLine",
      summary: "Delete a line with its endpoints",
      access: "editor",
    },
    ({ ctx, params }) => routing.deleteLine(ctx, p(params).project, p(params).line),
  ),
]);
