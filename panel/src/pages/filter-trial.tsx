/**
 * The filter half of "Try a filter or transformation" on a request's page: a filter typed here,
 * matched in the browser with the edge's own matcher (core/filter.ts) on the request as logged
 * once typing pauses; nothing is sent to the control plane.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { useEffect, useMemo, useState } from "react";
import { type FilterInput, matchesFilter } from "../../../core/filter.ts";
import { filterProblems } from "../../../core/filter-rules.ts";
import type { Target } from "../../../gen/relay/v1/routing_pb.ts";
import { CodeArea, Field } from "../ui.tsx";

/** How long typing pauses before the typed filter is tried. */
const TRY_AFTER_MS = 300;

/** The first target's filter, pretty-printed, to start from; `{}` when no target has one. */
export function firstFilterText(targets: Target[]): string {
  const filter = targets.find((t) => t.filter)?.filter;
  return filter ? JSON.stringify(filter, null, 2) : "{}";
}

/** What the typed filter says about this request. */
type Verdict =
  | { kind: "not-json" }
  | { kind: "problems"; problems: string[] }
  | { kind: "matches" }
  | { kind: "skips" };

function verdictOf(text: string, logged: FilterInput): Verdict {
  let filter: unknown;
  try {
    filter = JSON.parse(text);
  } catch {
    return { kind: "not-json" };
  }
  // Paths come as ".body.amount.$gt" (the root's as ""): read without the leading dot.
  const problems = filterProblems(filter, "").map(({ path, message }) =>
    path ? `${path.slice(1)}: ${message}` : message,
  );
  if (problems.length > 0) return { kind: "problems", problems };
  return matchesFilter(filter as JsonObject, logged) ? { kind: "matches" } : { kind: "skips" };
}

export function FilterTrial({ initial, logged }: { initial: string; logged: FilterInput }) {
  const [text, setText] = useState(initial);
  const [tried, setTried] = useState(initial);
  useEffect(() => {
    const typing = setTimeout(() => setTried(text), TRY_AFTER_MS);
    return () => clearTimeout(typing);
  }, [text]);
  const verdict = useMemo(() => verdictOf(tried, logged), [tried, logged]);
  return (
    <>
      <Field
        label="Filter to try"
        hint={
          <>
            Hookdeck Outpost filter syntax over <code>body</code> and <code>headers</code>{" "}
            (lowercase names); <code>{"{}"}</code> matches every call. Matched here, in the browser.
          </>
        }
      >
        {(control) => (
          <CodeArea control={control} name="filter" text={text} onText={setText} maxRows={12} />
        )}
      </Field>
      <div role="status" data-testid="filter-verdict" data-verdict={verdict.kind}>
        {verdict.kind === "not-json" && <p className="muted">not JSON yet</p>}
        {verdict.kind === "problems" && (
          <ul className="plain field-error">
            {verdict.problems.map((problem) => (
              <li key={problem}>{problem}</li>
            ))}
          </ul>
        )}
        {verdict.kind === "matches" && <p className="verdict-matches">matches this request</p>}
        {verdict.kind === "skips" && (
          <p className="verdict-skips">does not match: the target would skip it</p>
        )}
      </div>
    </>
  );
}
