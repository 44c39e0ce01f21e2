/**
 * The endpoint editor's draft: the form's text fields for an endpoint, from an existing one or
 * empty, and back to the API's EndpointSpec with what the browser can already tell is wrong (a
 * number that is not one, a header line without a colon, a schema or a filter that is not JSON).
 */
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import type { TargetRetry } from "../../../core/model.ts";
import {
  type CircuitBreaker,
  DeliveryMode,
  type Endpoint,
  type EndpointSpecSchema,
  Ordering,
} from "../../../gen/relay/v1/routing_pb.ts";

export type Spec = MessageInitShape<typeof EndpointSpecSchema>;

export type RetrySetting = keyof TargetRetry;

/** A target's retry settings as typed, each empty for the deployment's. */
export type RetryDraft = Record<RetrySetting, string>;

const retryDraftOf = (retry: TargetRetry | undefined): RetryDraft => ({
  maxAttempts: String(retry?.maxAttempts ?? ""),
  initialIntervalSeconds: String(retry?.initialIntervalSeconds ?? ""),
  backoffCoefficient: String(retry?.backoffCoefficient ?? ""),
  maximumIntervalSeconds: String(retry?.maximumIntervalSeconds ?? ""),
  windowSeconds: String(retry?.windowSeconds ?? ""),
});

export interface TargetDraft {
  /** React's key for the row; targets are matched by name on the server. */
  row: number;
  name: string;
  targetUrl: string;
  deliveryMode: DeliveryMode;
  timeoutSeconds: string;
  /** Flow control (async only); empty for no limit. */
  maxDeliveriesPerSecond: string;
  maxConcurrent: string;
  /** Its own retry policy (async only). */
  retry: RetryDraft;
  /** One `Name: value` a line. */
  headers: string;
  /** One header name a line. */
  secretHeaders: string;
  /** JSON text in Hookdeck Outpost's filter syntax; empty for every call. */
  filter: string;
  /** JavaScript source of `(request) => request`; empty for none. */
  transform: string;
}

export interface Draft {
  path: string;
  targets: TargetDraft[];
  /** One CIDR a line. */
  ipAllowlist: string;
  /** JSON text; empty for no schema. */
  schema: string;
  customRateLimit: boolean;
  requestsPerSecond: string;
  burst: string;
  /** Deliveries in accept order per Relay-Ordering-Key and target. */
  fifo: boolean;
  /** Not edited here (the API sets it); kept as it is so a save does not reset it. */
  circuitBreaker?: CircuitBreaker | undefined;
}

let rows = 0;
export const newTarget = (): TargetDraft => ({
  row: rows++,
  name: "",
  targetUrl: "",
  deliveryMode: DeliveryMode.ASYNC,
  timeoutSeconds: "30",
  maxDeliveriesPerSecond: "",
  maxConcurrent: "",
  retry: retryDraftOf(undefined),
  headers: "",
  secretHeaders: "",
  filter: "",
  transform: "",
});

export function draftOf(endpoint: Endpoint | undefined): Draft {
  if (!endpoint) {
    return {
      path: "",
      targets: [newTarget()],
      ipAllowlist: "",
      schema: "",
      customRateLimit: false,
      requestsPerSecond: "10",
      burst: "20",
      fifo: false,
    };
  }
  return {
    path: endpoint.path,
    targets: endpoint.targets.map((t) => ({
      row: rows++,
      name: t.name,
      targetUrl: t.targetUrl,
      deliveryMode: t.deliveryMode,
      timeoutSeconds: String(t.timeoutSeconds ?? 30),
      maxDeliveriesPerSecond: String(t.maxDeliveriesPerSecond ?? ""),
      maxConcurrent: String(t.maxConcurrent ?? ""),
      retry: retryDraftOf(t.retry),
      headers: Object.entries(t.headers)
        .map(([name, value]) => `${name}: ${value}`)
        .join("\n"),
      secretHeaders: t.secretHeaders.join("\n"),
      filter: t.filter ? JSON.stringify(t.filter, null, 2) : "",
      transform: t.transform ?? "",
    })),
    ipAllowlist: endpoint.ipAllowlist.join("\n"),
    schema: endpoint.schema ? JSON.stringify(endpoint.schema, null, 2) : "",
    customRateLimit: Boolean(endpoint.rateLimit),
    requestsPerSecond: String(endpoint.rateLimit?.requestsPerSecond ?? 10),
    burst: String(endpoint.rateLimit?.burst ?? 20),
    fifo: endpoint.ordering === Ordering.FIFO,
    circuitBreaker: endpoint.circuitBreaker,
  };
}

/** A field's JSON text as a JSON object, or why it is not one (like `example`); empty: none. */
function parseJsonObject(text: string, example: string): { value?: JsonObject; problem?: string } {
  if (text.trim() === "") return {};
  try {
    const value: unknown = JSON.parse(text);
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return { problem: `must be a JSON object, such as ${example}` };
    }
    return { value: value as JsonObject };
  } catch (error) {
    return { problem: `not valid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
}

export const parseSchema = (text: string) => parseJsonObject(text, '{"type": "object"}');

const parseFilter = (text: string) => parseJsonObject(text, '{"body": {"status": "paid"}}');

/** The draft as the API's EndpointSpec, or the fields the browser already knows are wrong. */
export function specOf(draft: Draft): { spec: Spec } | { fields: Record<string, string> } {
  const fields: Record<string, string> = {};
  const number = (path: string, text: string, integer: boolean) => {
    const value = Number(text);
    if (text.trim() === "" || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
      fields[path] = integer ? "must be a whole number" : "must be a number";
    }
    return value;
  };
  /** A flow limit: none when empty; sent only for an async target, the only kind it holds. */
  const limit = (t: TargetDraft, name: "maxDeliveriesPerSecond" | "maxConcurrent", i: number) =>
    t.deliveryMode === DeliveryMode.ASYNC && t[name].trim() !== ""
      ? { [name]: number(`targets.${i}.${name}`, t[name], true) }
      : {};
  /**
   * A retry policy of the settings filled in (the backoff factor may be a fraction); none when
   * all are empty, and sent only for an async target, the only kind it holds.
   */
  const retry = (t: TargetDraft, i: number) => {
    if (t.deliveryMode !== DeliveryMode.ASYNC) return {};
    const settings: Partial<Record<RetrySetting, number>> = {};
    for (const [name, text] of Object.entries(t.retry) as [RetrySetting, string][]) {
      if (text.trim() === "") continue;
      settings[name] = number(`targets.${i}.retry.${name}`, text, name !== "backoffCoefficient");
    }
    return Object.keys(settings).length > 0 ? { retry: settings } : {};
  };
  const targets = draft.targets.map((t, i) => {
    const headers: Record<string, string> = {};
    for (const line of t.headers.split("\n").filter((l) => l.trim() !== "")) {
      const colon = line.indexOf(":");
      if (colon < 1) fields[`targets.${i}.headers`] = `"${line}" is not "Name: value"`;
      else headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
    }
    const filter = parseFilter(t.filter);
    if (filter.problem) fields[`targets.${i}.filter`] = filter.problem;
    return {
      name: t.name,
      targetUrl: t.targetUrl,
      deliveryMode: t.deliveryMode,
      timeoutSeconds: number(`targets.${i}.timeoutSeconds`, t.timeoutSeconds, true),
      ...limit(t, "maxDeliveriesPerSecond", i),
      ...limit(t, "maxConcurrent", i),
      ...retry(t, i),
      headers,
      secretHeaders: lines(t.secretHeaders),
      ...(filter.value && { filter: filter.value }),
      // Whether it compiles is the API's to say, in the sandbox that runs it.
      ...(t.transform.trim() !== "" && { transform: t.transform }),
    };
  });
  const schema = parseSchema(draft.schema);
  if (schema.problem) fields.schema = schema.problem;
  const rateLimit = draft.customRateLimit
    ? {
        requestsPerSecond: number("rateLimit.requestsPerSecond", draft.requestsPerSecond, false),
        burst: number("rateLimit.burst", draft.burst, true),
      }
    : undefined;
  if (Object.keys(fields).length > 0) return { fields };
  return {
    spec: {
      path: draft.path.trim(),
      targets,
      ipAllowlist: lines(draft.ipAllowlist),
      ...(schema.value && { schema: schema.value }),
      ...(rateLimit && { rateLimit }),
      ...(draft.circuitBreaker && { circuitBreaker: draft.circuitBreaker }),
      ordering: draft.fifo ? Ordering.FIFO : Ordering.NONE,
    },
  };
}

/** A list typed one item a line: its lines trimmed, empty ones left out. */
const lines = (text: string) =>
  text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
