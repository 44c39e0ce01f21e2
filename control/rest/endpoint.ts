/**
 * The Endpoints routes (an endpoint's settings and its signing secret): each REST contract beside
 * the operation it calls, as control/connect/endpoint.ts serves the same operations over Connect.
 */
import * as answers from "../api/answers.ts";
import * as routing from "../api/routing.ts";
import * as signing from "../api/signing.ts";
import { base, endpointPath, p, type Route, route, tagged } from "./contract.ts";

export const endpointRoutes: Route[] = tagged("Endpoints", [
  route(
    "GET",
    `${base}/lines/:line/endpoints`,
    {
      operationId: "listEndpoints",
      summary: "A line's endpoints with their targets",
      access: "editor",
      answer: answers.endpointList,
    },
    ({ ctx, params }) =>
      routing
        .listEndpoints(ctx, p(params).project, p(params).line)
        .then((endpoints) => ({ endpoints })),
  ),
  route(
    "POST",
    `${base}/lines/:line/endpoints`,
    {
      operationId: "createEndpoint",
      summary: "Create an endpoint; its signing secret is shown this once",
      access: "editor",
      body: routing.createEndpointBody,
      example: {
        path: "orders",
        targets: [{ name: "billing", targetUrl: "https://billing.example.com/hook" }],
        ipAllowlist: [],
      },
      answer: answers.createdEndpoint,
      errors: ["conflict", "limit_exceeded"],
    },
    ({ ctx, params, body }) => routing.createEndpoint(ctx, p(params).project, p(params).line, body),
  ),
  route(
    "GET",
    endpointPath,
    {
      operationId: "getEndpoint",
      summary: "An endpoint with its targets",
      access: "editor",
      answer: answers.endpoint,
    },
    ({ ctx, params }) =>
      routing.getEndpoint(ctx, p(params).project, p(params).line, p(params).path),
  ),
  route(
    "PUT",
    endpointPath,
    {
      operationId: "updateEndpoint",
      summary: "Replace an endpoint's settings (a `path` renames it)",
      access: "editor",
      body: routing.updateEndpointBody,
      example: {
        targets: [
          { name: "billing", targetUrl: "https://billing.example.com/hook", timeoutSeconds: 10 },
        ],
        rateLimit: { requestsPerSecond: 50, burst: 100 },
      },
      answer: answers.endpoint,
      errors: ["conflict", "limit_exceeded"],
    },
    ({ ctx, params, body }) =>
      routing.updateEndpoint(ctx, p(params).project, p(params).line, p(params).path, body),
  ),
  route(
    "DELETE",
    endpointPath,
    {
      operationId: "deleteEndpoint",
      summary: "Delete an endpoint",
      access: "editor",
    },
    ({ ctx, params }) =>
      routing.deleteEndpoint(ctx, p(params).project, p(params).line, p(params).path),
  ),
  route(
    "POST",
    `${endpointPath}/signing-secret/rotate`,
    {
      operationId: "rotateSigningSecret",
      summary: "A new signing secret, shown this once; the old ones sign on for the overlap",
      description: "Answers once every edge signs with the new secret.",
      access: "editor",
      body: signing.rotateSigningSecretBody,
      example: { overlapSeconds: 3600 },
      answer: answers.rotatedSigningSecret,
    },
    ({ ctx, params, body }) =>
      signing.rotateSigningSecret(ctx, p(params).project, p(params).line, p(params).path, body),
  ),
]);
