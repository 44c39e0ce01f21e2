/**
 * The paths the document describes that no route of the table answers: the ops paths every
 * process answers, and the edge's inbound call on each project's own host. Written here by hand,
 * with the schemas of their answers.
 */
import { z } from "zod";
import { MAX_ORDERING_KEY_LENGTH } from "../../core/lanes.ts";
import { MAX_TARGET_URL_LENGTH } from "../../core/targets.ts";
import { json, type Refusals, ref, segment } from "./refusals.ts";

/** The answers of the paths no route of the table answers. */
export const health = z.strictObject({ status: z.literal("ok") });

export const readiness = z.strictObject({
  status: z.enum(["ready", "degraded", "unavailable"]),
  checks: z.record(z.string(), z.string()).describe('Each dependency\'s "ok", or why not'),
});

export const accepted = z.strictObject({
  status: z.enum(["queued", "scheduled"]),
  requestId: z.string(),
});

/** The ops paths (core/ops.ts), which the control plane answers before any route. */
export const opsPaths = (refusals: Refusals) => ({
  "/healthz": {
    get: {
      operationId: "healthz",
      summary: "The process is alive",
      tags: ["Operations"],
      security: [],
      responses: { "200": { description: "Alive", content: json(ref("Health")) } },
    },
  },
  "/readyz": {
    get: {
      operationId: "readyz",
      summary: "The process's dependencies answer (the control plane's: Postgres)",
      tags: ["Operations"],
      security: [],
      responses: {
        "200": { description: "Ready, or degraded", content: json(ref("Readiness")) },
        "503": { description: "A dependency does not answer", content: json(ref("Readiness")) },
      },
    },
  },
  "/metrics": {
    get: {
      operationId: "metrics",
      summary: "Prometheus text metrics",
      description:
        "With RELAY_METRICS_TOKEN set, it needs that token; unset, only loopback peers that are not a proxy passing a request on may scrape.",
      tags: ["Operations"],
      security: [{}, { metricsToken: [] }],
      responses: {
        "200": {
          description: "The metrics",
          content: { "text/plain": { schema: { type: "string" } } },
        },
        ...refusals.responses(["forbidden"]),
      },
    },
  },
});

/** The edge's inbound call, on the project's own host (docs/api.md, "The inbound pipeline"). */
export const edgePath = (refusals: Refusals) => ({
  "/{line}/{endpoint}": {
    servers: [
      {
        url: "{scheme}://{project}.{domain}",
        description: "The edge: each project is reached on a host of its own",
        variables: {
          scheme: { default: "http", enum: ["http", "https"] },
          project: { default: "demo", description: "The project's slug" },
          domain: { default: "localhost:8787", description: "RELAY_EDGE_DOMAIN" },
        },
      },
    ],
    post: {
      operationId: "relayRequest",
      summary: "Relay a request to an endpoint's targets (the edge's inbound call)",
      description:
        "An async endpoint answers 202 at once and delivers to each of its targets, retried; a sync or stream endpoint answers with its target's own answer. Every answer from the delivery step on carries `X-Relay-Request-Id`, and every answer past the endpoint lookup the `RateLimit-*` headers. Any method but POST is 405 `method_not_allowed` with `Allow: POST`. The checks run in the order of docs/api.md's inbound pipeline.",
      tags: ["Edge (inbound)"],
      security: [{ apiKey: [] }],
      parameters: [
        { name: "line", in: "path", required: true, schema: segment },
        { name: "endpoint", in: "path", required: true, schema: segment },
        {
          name: "Idempotency-Key",
          in: "header",
          description:
            "A repeat with the same key answers what the first call answered and queues nothing; not on a stream endpoint",
          schema: { type: "string", minLength: 1, maxLength: 255 },
        },
        {
          name: "Relay-Delay",
          in: "header",
          description:
            "Deliver this long from now (at most 7 days; async endpoints only). Not with `Relay-Not-Before`: both is 400 `bad_request`",
          schema: { type: "string", pattern: "^[0-9]+[smhd]$" },
        },
        {
          name: "Relay-Not-Before",
          in: "header",
          // A plain string: a date-time header is one openapi-python-client cannot generate.
          description:
            "Deliver at this time, an RFC 3339 date-time such as `2026-11-24T12:00:00Z` (at most 7 days ahead; async endpoints only). Not with `Relay-Delay`: both is 400 `bad_request`",
          schema: {
            type: "string",
            pattern:
              "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$",
          },
        },
        ...(["Relay-Callback", "Relay-Failure-Callback"] as const).map((name) => ({
          name,
          in: "header" as const,
          description: `An http or https URL told, signed, how each target's delivery ${name === "Relay-Callback" ? "succeeded" : "failed for good"}, with its answer (async endpoints only; checked as a target's URL is, else 400 \`bad_request\`). Not forwarded`,
          schema: { type: "string", format: "uri", maxLength: MAX_TARGET_URL_LENGTH },
        })),
        {
          name: "Relay-Ordering-Key",
          in: "header",
          description:
            'On an ordered endpoint (`ordering: "fifo"`): its async deliveries with the same key reach each target in accept order, one at a time; absent, the endpoint\'s default lane. At most 128 characters of visible ASCII, else 400 `bad_request` (on any endpoint). Not forwarded; an unordered endpoint ignores a well-formed one',
          schema: {
            type: "string",
            maxLength: MAX_ORDERING_KEY_LENGTH,
            pattern: "^[\\x21-\\x7e]*$",
          },
        },
        {
          name: "traceparent",
          in: "header",
          description:
            "W3C trace context (`00-{32 hex trace id}-{16 hex parent id}-{2 hex flags}`): when Relay exports traces, its spans continue this trace and each target gets the traceparent of its attempt's span; otherwise it is passed on as it came. A malformed one is ignored, never refused: the spans start a new trace",
          schema: { type: "string" },
        },
      ],
      requestBody: {
        description:
          "The payload, delivered as sent; with the endpoint's schema, JSON that satisfies it",
        content: {
          "application/json": { schema: ref("JsonValue"), example: { hello: "relay" } },
          // Any other type passes as it is when the endpoint has no schema; generators know this
          // one by name, where `*/*` they drop.
          "application/octet-stream": { schema: { type: "string", format: "binary" } },
        },
      },
      responses: {
        "202": {
          description:
            "An async endpoint: queued, or scheduled by `Relay-Delay` or `Relay-Not-Before`",
          headers: {
            "X-Relay-Request-Id": { schema: { type: "string" } },
            "RateLimit-Limit": { schema: { type: "integer" } },
            "RateLimit-Remaining": { schema: { type: "integer" } },
            "RateLimit-Reset": { schema: { type: "integer" } },
          },
          content: json(ref("Accepted")),
        },
        ...refusals.responses([
          "bad_request",
          "invalid_or_missing_key",
          "key_revoked",
          "key_expired",
          "insufficient_credits",
          "ip_not_allowed",
          "not_found",
          "request_timeout",
          "payload_too_large",
          "unsupported_media_type",
          "validation_failed",
          "idempotency_key_reused",
          "rate_limited",
          "internal",
          "target_unreachable",
          "unavailable",
          "target_timeout",
        ]),
        default: {
          description:
            'A sync or stream endpoint: the target\'s own status, headers and body (of any content type), as it answered. A call every target\'s filter skips: 200 `{"status": "skipped", "requestId"}`, whatever the mode',
        },
      },
    },
  },
});
