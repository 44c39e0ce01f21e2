/**
 * The Request log routes (requests, read and cancelled): each REST contract beside the operation it
 * calls, as control/connect/request-log.ts serves the same operations over Connect.
 */
import * as answers from "../api/request-answers.ts";
import * as cancel from "../api/cancel.ts";
import * as requests from "../api/requests.ts";
import * as sendAgain from "../api/send-again.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const requestLogRoutes: Route[] = tagged("Request log", [
  route(
    "GET",
    `${base}/requests`,
    {
      operationId: "listRequests",
      summary: "The request log, newest first",
      access: "editor",
      query: requests.listRequestsQuery,
      answer: answers.requestPage,
    },
    ({ ctx, params, query }) => requests.listRequests(ctx, p(params).project, query),
  ),
  route(
    "GET",
    `${base}/requests/:requestId`,
    {
      operationId: "getRequest",
      summary:
        "A request with its attempts; one the edge accepted and the worker has not logged yet reads as queued or scheduled (from Temporal: 503 when it cannot answer)",
      access: "editor",
      answer: answers.request,
      errors: ["unavailable"],
    },
    ({ ctx, params }) => requests.getRequest(ctx, p(params).project, p(params).requestId),
  ),
  route(
    "POST",
    `${base}/requests/:requestId/send-again`,
    {
      operationId: "sendAgain",
      summary:
        "A new request (a new id, `resentFrom` this one) to this request's endpoint, with its headers and its body or the one given, checked, billed and logged like any call; its endpoint's targets must all be async",
      access: "editor",
      body: sendAgain.sendAgainBody,
      example: { body: { encoding: "utf8", text: '{"order":42}' } },
      answer: answers.request,
      status: 202,
      errors: [
        "conflict",
        "insufficient_credits",
        "limit_exceeded",
        "payload_too_large",
        "unsupported_media_type",
        "validation_failed",
        "unavailable",
      ],
    },
    ({ ctx, params, body }) =>
      sendAgain.sendAgain(ctx, p(params).project, p(params).requestId, body),
  ),
  route(
    "DELETE",
    `${base}/requests/:requestId`,
    {
      operationId: "cancelRequest",
      summary: "Cancel a request not yet delivered (scheduled, or between attempts)",
      access: "editor",
      answer: answers.request,
      errors: ["conflict", "request_already_delivered"],
    },
    ({ ctx, params }) => cancel.cancelRequest(ctx, p(params).project, p(params).requestId),
  ),
]);
