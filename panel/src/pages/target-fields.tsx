/**
 * The endpoint editor's targets: a row of fields for each (name, URL, mode, timeout, an async
 * target's flow limits and retries, headers, secret headers, filter, transformation), with the
 * API's errors about each field beside it and about the list as a whole above it.
 */
import { DeliveryMode } from "../../../gen/relay/v1/routing_pb.ts";
import { fieldError, type Problem } from "../errors.ts";
import { Field } from "../ui.tsx";
import { newTarget, type TargetDraft } from "./endpoint-draft.ts";
import { RetryFields } from "./retry-fields.tsx";

export function TargetFields({
  targets,
  problem,
  onChange,
}: {
  targets: TargetDraft[];
  /** The refusal shown: the browser's own or the API's. */
  problem: Problem | null;
  /** Changes the draft's targets as they are when the change lands. */
  onChange: (update: (targets: TargetDraft[]) => TargetDraft[]) => void;
}) {
  const setTarget = (row: number, change: Partial<TargetDraft>) =>
    onChange((ts) => ts.map((t) => (t.row === row ? { ...t, ...change } : t)));

  // Errors about the list of targets as a whole (none, two answering, same names).
  const targetsError = problem?.fields.targets;

  return (
    <fieldset>
      <legend>Targets</legend>
      <p className="hint">
        Every call is delivered to each target whose filter matches it, as its transformation, if it
        has one, makes it. At most one target may be sync (answers the caller, up to its timeout) or
        stream (proxied as it arrives); the others are async (queued and retried).
      </p>
      <p className="field-error" aria-live="polite">
        {targetsError}
      </p>
      {targets.map((target, i) => (
        <fieldset key={target.row} className="target">
          <legend>Target {i + 1}</legend>
          <Field label="Name" error={fieldError(problem, `targets.${i}.name`)}>
            {(control) => (
              <input
                {...control}
                name={`targets.${i}.name`}
                value={target.name}
                onChange={(e) => setTarget(target.row, { name: e.target.value })}
              />
            )}
          </Field>
          <Field label="Target URL" error={fieldError(problem, `targets.${i}.targetUrl`)}>
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
          <Field label="Delivery mode" error={fieldError(problem, `targets.${i}.deliveryMode`)}>
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
            error={fieldError(problem, `targets.${i}.timeoutSeconds`)}
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
          {target.deliveryMode === DeliveryMode.ASYNC && (
            <>
              <FlowLimits target={target} i={i} problem={problem} onChange={setTarget} />
              <RetryFields target={target} i={i} problem={problem} onChange={setTarget} />
            </>
          )}
          <Field
            label="Extra headers"
            hint="One “Name: value” a line, sent with every delivery to this target."
            error={fieldError(problem, `targets.${i}.headers`)}
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
          <Field
            label="Secret headers"
            hint="One header name a line (up to 32): forwarded to the target, never kept in the request log."
            error={fieldError(problem, `targets.${i}.secretHeaders`)}
          >
            {(control) => (
              <textarea
                {...control}
                name={`targets.${i}.secretHeaders`}
                rows={2}
                placeholder="X-Api-Token"
                value={target.secretHeaders}
                onChange={(e) => setTarget(target.row, { secretHeaders: e.target.value })}
              />
            )}
          </Field>
          <Field
            label="Filter"
            hint={
              <>
                Hookdeck Outpost filter syntax over <code>body</code> and <code>headers</code>
                {"; empty: every call."}
              </>
            }
            error={fieldError(problem, `targets.${i}.filter`)}
          >
            {(control) => (
              <textarea
                {...control}
                name={`targets.${i}.filter`}
                className="code"
                rows={3}
                spellCheck={false}
                placeholder={'{"body": {"status": {"$in": ["paid", "shipped"]}}}'}
                value={target.filter}
                onChange={(e) => setTarget(target.row, { filter: e.target.value })}
              />
            )}
          </Field>
          <Field
            label="Transformation"
            hint={
              <>
                A JavaScript function <code>(request) =&gt; request</code> over its{" "}
                <code>path</code>, <code>query</code>, <code>headers</code> and <code>body</code>:
                return the call to send, or <code>null</code> to skip it; empty: sent as it came.
              </>
            }
            error={fieldError(problem, `targets.${i}.transform`)}
          >
            {(control) => (
              <textarea
                {...control}
                name={`targets.${i}.transform`}
                className="code"
                rows={Math.min(16, Math.max(3, target.transform.split("\n").length + 1))}
                spellCheck={false}
                placeholder="(request) => ({ ...request, body: { order: request.body } })"
                value={target.transform}
                onChange={(e) => setTarget(target.row, { transform: e.target.value })}
              />
            )}
          </Field>
          {targets.length > 1 && (
            <button
              type="button"
              onClick={() => onChange((ts) => ts.filter((t) => t.row !== target.row))}
            >
              Remove target {i + 1}
            </button>
          )}
        </fieldset>
      ))}
      <button type="button" onClick={() => onChange((ts) => [...ts, newTarget()])}>
        Add a target
      </button>
    </fieldset>
  );
}

/** An async target's flow control: starts per second and attempts at once, empty for no limit. */
function FlowLimits({
  target,
  i,
  problem,
  onChange,
}: {
  target: TargetDraft;
  i: number;
  problem: Problem | null;
  onChange: (row: number, change: Partial<TargetDraft>) => void;
}) {
  const fields = [
    ["maxDeliveriesPerSecond", "Deliveries per second at most"],
    ["maxConcurrent", "Deliveries at once at most"],
  ] as const;
  return fields.map(([name, label]) => (
    <Field
      key={name}
      label={label}
      hint="1 to 1000, empty for no limit. Deliveries over it wait, in the order they came in."
      error={fieldError(problem, `targets.${i}.${name}`)}
    >
      {(control) => (
        <input
          {...control}
          name={`targets.${i}.${name}`}
          type="number"
          min={1}
          max={1000}
          value={target[name]}
          onChange={(e) => onChange(target.row, { [name]: e.target.value })}
        />
      )}
    </Field>
  ));
}
