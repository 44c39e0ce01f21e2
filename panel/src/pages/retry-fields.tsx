/**
 * An async target's own retry policy in the endpoint editor: five settings side by side, each
 * empty for the deployment's, with the API's refusal of each beside it.
 */
import { retryBounds } from "../../../core/retry.ts";
import { fieldError, type Problem } from "../errors.ts";
import { Field } from "../ui.tsx";
import type { RetrySetting, TargetDraft } from "./endpoint-draft.ts";

const retryLabels: [RetrySetting, string][] = [
  ["maxAttempts", "Max attempts"],
  ["initialIntervalSeconds", "First retry after (s)"],
  ["backoffCoefficient", "Backoff factor"],
  ["maximumIntervalSeconds", "Longest wait (s)"],
  ["windowSeconds", "Retry for (s)"],
];

export function RetryFields({
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
  return (
    <fieldset className="retries">
      <legend>Retries</legend>
      <p className="hint">
        Empty: Relay's default (from 1 s, doubling, at most 1 h apart, for 24 h)
      </p>
      <div className="row">
        {retryLabels.map(([name, label]) => (
          <Field key={name} label={label} error={fieldError(problem, `targets.${i}.retry.${name}`)}>
            {(control) => (
              <input
                {...control}
                name={`targets.${i}.retry.${name}`}
                type="number"
                // The widest bounds, a paid plan's; the API says where a free plan's end.
                min={retryBounds.paid[name].min}
                max={retryBounds.paid[name].max}
                step={name === "backoffCoefficient" ? "any" : 1}
                value={target.retry[name]}
                onChange={(e) =>
                  onChange(target.row, { retry: { ...target.retry, [name]: e.target.value } })
                }
              />
            )}
          </Field>
        ))}
      </div>
    </fieldset>
  );
}
