/**
 * The endpoint editor, for a new endpoint and an existing one: path, targets (mode, timeout,
 * flow limits, retries, headers, filter, transformation), IP allowlist, JSON Schema and rate
 * limit. What the browser can tell at once (a number that is not one, a schema or a filter that
 * is not JSON) is said before sending; every other rule is the API's (a transformation that does
 * not compile among them), and its messages appear next to the fields they name. The draft and those checks are endpoint-draft.ts; the targets' rows,
 * target-fields.tsx.
 */
import { type FormEvent, useState } from "react";
import type { Endpoint } from "../../../gen/relay/v1/routing_pb.ts";
import { fieldError, type Problem } from "../errors.ts";
import { Field, FormError } from "../ui.tsx";
import { type Draft, draftOf, parseSchema, type Spec, specOf } from "./endpoint-draft.ts";
import { TargetFields } from "./target-fields.tsx";

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

      <TargetFields
        targets={draft.targets}
        problem={shown}
        onChange={(update) => setDraft((d) => ({ ...d, targets: update(d.targets) }))}
      />

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

      <fieldset>
        <legend>Ordering</legend>
        <div className="checkbox">
          <input
            id="ordering-fifo"
            name="ordering"
            type="checkbox"
            checked={draft.fifo}
            onChange={(e) => set({ fifo: e.target.checked })}
          />
          <label htmlFor="ordering-fifo">Deliver in order (fifo)</label>
        </div>
        <p className="hint">
          Async deliveries with the same Relay-Ordering-Key header (or all calls that send none)
          reach each target in the order Relay accepted them, one at a time; a failing delivery
          holds only its own key.
        </p>
      </fieldset>

      <FormError problem={shown} />
      <button type="submit" disabled={saving}>
        {saving ? "Saving…" : submitLabel}
      </button>
    </form>
  );
}
