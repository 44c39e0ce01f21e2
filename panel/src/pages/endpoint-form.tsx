/**
 * The endpoint editor, for a new endpoint and an existing one: path, targets (mode, timeout,
 * headers), IP allowlist, JSON Schema and rate limit. What the browser can tell at once (a
 * number that is not one, a schema that is not JSON) is said before sending; every other rule
 * is the API's, and its messages appear next to the fields they name.
 */
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import { type FormEvent, useState } from "react";
import {
  type CircuitBreaker,
  DeliveryMode,
  type Endpoint,
  type EndpointSpecSchema,
} from "../../../gen/relay/v1/routing_pb.ts";
import { fieldError, type Problem } from "../errors.ts";
import { Field, FormError } from "../ui.tsx";

type Spec = MessageInitShape<typeof EndpointSpecSchema>;

interface TargetDraft {
  /** React's key for the row; targets are matched by name on the server. */
  row: number;
  name: string;
  targetUrl: string;
  deliveryMode: DeliveryMode;
  timeoutSeconds: string;
  /** One `Name: value` a line. */
  headers: string;
}

interface Draft {
  path: string;
  targets: TargetDraft[];
  /** One CIDR a line. */
  ipAllowlist: string;
  /** JSON text; empty for no schema. */
  schema: string;
  customRateLimit: boolean;
  requestsPerSecond: string;
  burst: string;
  /** Not edited here (the API sets it); kept as it is so a save does not reset it. */
  circuitBreaker?: CircuitBreaker | undefined;
}

let rows = 0;
const newTarget = (): TargetDraft => ({
  row: rows++,
  name: "",
  targetUrl: "",
  deliveryMode: DeliveryMode.ASYNC,
  timeoutSeconds: "30",
  headers: "",
});

function draftOf(endpoint: Endpoint | undefined): Draft {
  if (!endpoint) {
    return {
      path: "",
      targets: [newTarget()],
      ipAllowlist: "",
      schema: "",
      customRateLimit: false,
      requestsPerSecond: "10",
      burst: "20",
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
      headers: Object.entries(t.headers)
        .map(([name, value]) => `${name}: ${value}`)
        .join("\n"),
    })),
    ipAllowlist: endpoint.ipAllowlist.join("\n"),
    schema: endpoint.schema ? JSON.stringify(endpoint.schema, null, 2) : "",
    customRateLimit: Boolean(endpoint.rateLimit),
    requestsPerSecond: String(endpoint.rateLimit?.requestsPerSecond ?? 10),
    burst: String(endpoint.rateLimit?.burst ?? 20),
    circuitBreaker: endpoint.circuitBreaker,
  };
}

/** The schema text as JSON, or why it is not a JSON object. */
function parseSchema(text: string): { schema?: JsonObject; problem?: string } {
  if (text.trim() === "") return {};
  try {
    const value: unknown = JSON.parse(text);
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      return { problem: 'must be a JSON object, such as {"type": "object"}' };
    }
    return { schema: value as JsonObject };
  } catch (error) {
    return { problem: `not valid JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** The draft as the API's EndpointSpec, or the fields the browser already knows are wrong. */
function specOf(draft: Draft): { spec: Spec } | { fields: Record<string, string> } {
  const fields: Record<string, string> = {};
  const number = (path: string, text: string, integer: boolean) => {
    const value = Number(text);
    if (text.trim() === "" || !Number.isFinite(value) || (integer && !Number.isInteger(value))) {
      fields[path] = integer ? "must be a whole number" : "must be a number";
    }
    return value;
  };
  const targets = draft.targets.map((t, i) => {
    const headers: Record<string, string> = {};
    for (const line of t.headers.split("\n").filter((l) => l.trim() !== "")) {
      const colon = line.indexOf(":");
      if (colon < 1) fields[`targets.${i}.headers`] = `"${line}" is not "Name: value"`;
      else headers[line.slice(0, colon).trim()] = line.slice(colon + 1).trim();
    }
    return {
      name: t.name,
      targetUrl: t.targetUrl,
      deliveryMode: t.deliveryMode,
      timeoutSeconds: number(`targets.${i}.timeoutSeconds`, t.timeoutSeconds, true),
      headers,
    };
  });
  const { schema, problem } = parseSchema(draft.schema);
  if (problem) fields.schema = problem;
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
      ipAllowlist: draft.ipAllowlist
        .split("\n")
        .map((l) => l.trim())
        .filter(Boolean),
      ...(schema && { schema }),
      ...(rateLimit && { rateLimit }),
      ...(draft.circuitBreaker && { circuitBreaker: draft.circuitBreaker }),
    },
  };
}

/** API paths such as "ipAllowlist.2" name a line of the allowlist field. */
function allowlistError(problem: Problem | null): string | undefined {
  if (!problem) return undefined;
  const messages = Object.entries(problem.fields)
    .filter(([p]) => p === "ipAllowlist" || p.startsWith("ipAllowlist."))
    .map(([p, m]) => (p === "ipAllowlist" ? m : `line ${Number(p.split(".")[1]) + 1}: ${m}`));
  return messages.length > 0 ? messages.join("; ") : undefined;
}

export function EndpointForm({
  endpoint,
  saving,
  problem,
  onSave,
  submitLabel,
}: {
  endpoint?: Endpoint | undefined;
  saving: boolean;
  /** The API's refusal of the last save. */
  problem: Problem | null;
  onSave: (spec: Spec) => void;
  submitLabel: string;
}) {
  const [draft, setDraft] = useState(() => draftOf(endpoint));
  const [local, setLocal] = useState<Problem | null>(null);
  const shown = local ?? problem;
  const set = (change: Partial<Draft>) => setDraft((d) => ({ ...d, ...change }));
  const setTarget = (row: number, change: Partial<TargetDraft>) =>
    setDraft((d) => ({
      ...d,
      targets: d.targets.map((t) => (t.row === row ? { ...t, ...change } : t)),
    }));

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const result = specOf(draft);
    if ("fields" in result) {
      setLocal({ kind: "invalid", code: "bad_request", message: "", fields: result.fields });
      return;
    }
    setLocal(null);
    onSave(result.spec);
  };

  const schemaCheck = parseSchema(draft.schema);
  // Errors about the list of targets as a whole (none, two answering, same names).
  const targetsError = shown?.fields.targets;

  return (
    <form onSubmit={submit} noValidate className="endpoint-form">
      <Field
        label="Endpoint path"
        hint="The second path segment: letters, digits, '.', '_' and '-'."
        error={fieldError(shown, "path")}
      >
        {(control) => (
          <input
            {...control}
            name="path"
            value={draft.path}
            onChange={(e) => set({ path: e.target.value })}
          />
        )}
      </Field>

      <fieldset>
        <legend>Targets</legend>
        <p className="hint">
          Every call is delivered to each target. At most one target may be sync (answers the
          caller, up to its timeout) or stream (proxied as it arrives); the others are async (queued
          and retried).
        </p>
        <p className="field-error" aria-live="polite">
          {targetsError}
        </p>
        {draft.targets.map((target, i) => (
          <fieldset key={target.row} className="target">
            <legend>Target {i + 1}</legend>
            <Field label="Name" error={fieldError(shown, `targets.${i}.name`)}>
              {(control) => (
                <input
                  {...control}
                  name={`targets.${i}.name`}
                  value={target.name}
                  onChange={(e) => setTarget(target.row, { name: e.target.value })}
                />
              )}
            </Field>
            <Field label="Target URL" error={fieldError(shown, `targets.${i}.targetUrl`)}>
              {(control) => (
                <input
                  {...control}
                  name={`targets.${i}.targetUrl`}
                  type="url"
                  placeholder="https://hooks.example.com/in"
                  value={target.targetUrl}
                  onChange={(e) => setTarget(target.row, { targetUrl: e.target.value })}
                />
              )}
            </Field>
            <Field label="Delivery mode" error={fieldError(shown, `targets.${i}.deliveryMode`)}>
              {(control) => (
                <select
                  {...control}
                  name={`targets.${i}.deliveryMode`}
                  value={target.deliveryMode}
                  onChange={(e) => setTarget(target.row, { deliveryMode: Number(e.target.value) })}
                >
                  <option value={DeliveryMode.ASYNC}>async: queued, retried</option>
                  <option value={DeliveryMode.SYNC}>sync: answers the caller</option>
                  <option value={DeliveryMode.STREAM}>stream: proxied as it arrives</option>
                </select>
              )}
            </Field>
            <Field
              label="Timeout (seconds)"
              hint="1 to 90; how long a sync or stream target has to answer."
              error={fieldError(shown, `targets.${i}.timeoutSeconds`)}
            >
              {(control) => (
                <input
                  {...control}
                  name={`targets.${i}.timeoutSeconds`}
                  type="number"
                  min={1}
                  max={90}
                  value={target.timeoutSeconds}
                  onChange={(e) => setTarget(target.row, { timeoutSeconds: e.target.value })}
                />
              )}
            </Field>
            <Field
              label="Extra headers"
              hint="One “Name: value” a line, sent with every delivery to this target."
              error={fieldError(shown, `targets.${i}.headers`)}
            >
              {(control) => (
                <textarea
                  {...control}
                  name={`targets.${i}.headers`}
                  rows={2}
                  value={target.headers}
                  onChange={(e) => setTarget(target.row, { headers: e.target.value })}
                />
              )}
            </Field>
            {draft.targets.length > 1 && (
              <button
                type="button"
                onClick={() => set({ targets: draft.targets.filter((t) => t.row !== target.row) })}
              >
                Remove target {i + 1}
              </button>
            )}
          </fieldset>
        ))}
        <button type="button" onClick={() => set({ targets: [...draft.targets, newTarget()] })}>
          Add a target
        </button>
      </fieldset>

      <Field
        label="IP allowlist"
        hint="One CIDR a line (IPv4 or IPv6); empty allows every address."
        error={allowlistError(shown)}
      >
        {(control) => (
          <textarea
            {...control}
            name="ipAllowlist"
            rows={3}
            placeholder={"203.0.113.0/24\n2001:db8::/32"}
            value={draft.ipAllowlist}
            onChange={(e) => set({ ipAllowlist: e.target.value })}
          />
        )}
      </Field>

      <Field
        label="JSON Schema"
        hint={
          draft.schema.trim() === ""
            ? "Empty: any body is accepted (a body labelled JSON must still parse)."
            : schemaCheck.problem
              ? `Not yet a schema: ${schemaCheck.problem}`
              : "Valid JSON. The API checks that it compiles (draft-07) when you save."
        }
        error={fieldError(shown, "schema")}
      >
        {(control) => (
          <textarea
            {...control}
            name="schema"
            className="code"
            rows={8}
            spellCheck={false}
            placeholder={
              '{"type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}}'
            }
            value={draft.schema}
            onChange={(e) => set({ schema: e.target.value })}
          />
        )}
      </Field>

      <fieldset>
        <legend>Rate limit</legend>
        <div className="checkbox">
          <input
            id="custom-rate-limit"
            type="checkbox"
            checked={draft.customRateLimit}
            onChange={(e) => set({ customRateLimit: e.target.checked })}
          />
          <label htmlFor="custom-rate-limit">
            Set this endpoint's own limit (otherwise the plan's)
          </label>
        </div>
        {draft.customRateLimit && (
          <div className="row">
            <Field
              label="Requests per second"
              error={fieldError(shown, "rateLimit.requestsPerSecond")}
            >
              {(control) => (
                <input
                  {...control}
                  name="rateLimit.requestsPerSecond"
                  type="number"
                  min={0}
                  step="any"
                  value={draft.requestsPerSecond}
                  onChange={(e) => set({ requestsPerSecond: e.target.value })}
                />
              )}
            </Field>
            <Field label="Burst" error={fieldError(shown, "rateLimit.burst")}>
              {(control) => (
                <input
                  {...control}
                  name="rateLimit.burst"
                  type="number"
                  min={1}
                  value={draft.burst}
                  onChange={(e) => set({ burst: e.target.value })}
                />
              )}
            </Field>
          </div>
        )}
      </fieldset>

      <FormError problem={shown} />
      <button type="submit" disabled={saving}>
        {saving ? "Saving…" : submitLabel}
      </button>
    </form>
  );
}
