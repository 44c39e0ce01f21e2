/**
 * The Request log routes (requests read, cancelled, sent again and erased; the project's retention
 * of their content): each REST contract beside the operation it calls, as
 * control/connect/request-log.ts serves the same operations over Connect.
 */
import * as cancel from "../api/cancel.ts";
import * as erase from "../api/erase.ts";
import * as answers from "../api/request-answers.ts";
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
  route(
    "DELETE",
    `${base}/requests/:requestId/content`,
    {
      operationId: "eraseRequestContent",
      summary:
        "Erase a finished request's headers, body and its targets' answers from the log at once (its status and attempts stay); it can then be neither replayed nor sent again",
      access: "editor",
      answer: answers.request,
      errors: ["conflict"],
    },
    ({ ctx, params }) => erase.eraseRequestContent(ctx, p(params).project, p(params).requestId),
  ),
  route(
    "GET",
    `${base}/retention`,
    {
      operationId: "getRetention",
      summary: "How long the project keeps its requests' headers, bodies and answers",
      access: "editor",
      answer: answers.retention,
    },
    ({ ctx, params }) => erase.getRetention(ctx, p(params).project),
  ),
  route(
    "PUT",
    `${base}/retention`,
    {
      operationId: "setRetention",
      summary:
        "Set how many days the project keeps its requests' headers, bodies and answers (the daily run erases older ones); null: as long as the log keeps the request",
      access: "owner",
      body: erase.retentionBody,
      example: { retentionDays: 7 },
      answer: answers.retention,
    },
    ({ ctx, params, body }) => erase.setRetention(ctx, p(params).project, body),
  ),
]);
