/**
 * The transformation half of "Try a filter or transformation" on a request's page: a target's
 * transformation, or one typed, run on the request as logged, as that target would be handed it
 * (core/transform.ts `transformInput`: the target URL's path and query, the logged headers with
 * the target's own, the body). Runs go to the control plane's sandbox, the one deliveries use
 * (TransformService.TryTransform); nothing is sent to a target or saved.
 */
import { fromJson, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { useQuery } from "@connectrpc/connect-query";
import { useEffect, useMemo, useState } from "react";
import {
  TRANSFORM_LIMITS,
  type TransformRequest,
  transformInput,
} from "../../../core/transform.ts";
import type { Target } from "../../../gen/relay/v1/routing_pb.ts";
import { TransformService } from "../../../gen/relay/v1/transforms_pb.ts";
import { fieldError, problemOf } from "../errors.ts";
import { useProject } from "../project.ts";
import { CodeArea, Field } from "../ui.tsx";

/** How long typing pauses before the typed transformation is tried. */
const TRY_AFTER_MS = 300;

/** The call `target` would be handed for this request: its URL's path and query, its headers. */
export function targetInput(
  target: Target,
  logged: { headers: Record<string, string>; body: Uint8Array },
): TransformRequest {
  return transformInput(target.targetUrl, { ...logged.headers, ...target.headers }, logged.body);
}

/** What the control plane's sandbox made of `source` on `input`, shown as its outcome. */
export function TransformOutcome({ source, input }: { source: string; input: TransformRequest }) {
  const { project } = useProject();
  const request = useMemo(() => ({ ...input, body: fromJson(ValueSchema, input.body) }), [input]);
  // The same source on the same call answers the same: tried once, not again on focus.
  const tried = useQuery(
    TransformService.method.tryTransform,
    { project, transform: source, request },
    { staleTime: Number.POSITIVE_INFINITY },
  );
  if (tried.error) {
    const problem = problemOf(tried.error);
    return (
      <p className="field-error" data-transform-outcome="refused">
        {fieldError(problem, "transform") ?? problem.message}
      </p>
    );
  }
  const outcome = tried.data?.outcome;
  switch (outcome?.case) {
    case undefined:
      return (
        <p className="loading" role="status">
          Running…
        </p>
      );
    case "dropped":
      return (
        <p className="verdict-skips" data-transform-outcome="dropped">
          dropped: it returns null, so the target would skip this call
        </p>
      );
    case "error":
      return (
        <p className="field-error" data-transform-outcome="error">
          fails: {outcome.value}
        </p>
      );
    case "request": {
      const { path, query, headers, body } = outcome.value;
      const sent = { path, query, headers, body: body ? toJson(ValueSchema, body) : null };
      return (
        <figure className="body" data-transform-outcome="request">
          <figcaption className="verdict-matches">The call the target would be sent</figcaption>
          <pre className="code" data-testid="transformed-request">
            {JSON.stringify(sent, null, 2)}
          </pre>
        </figure>
      );
    }
  }
}

/** A transformation typed here, tried as one of the targets would be handed this request. */
export function TransformTrial({
  targets,
  logged,
}: {
  /** The endpoint's targets, at least one. */
  targets: Target[];
  logged: { headers: Record<string, string>; body: Uint8Array };
}) {
  const first = targets.find((t) => t.transform) ?? targets[0];
  const initial = first?.transform ?? "(request) => request";
  const [text, setText] = useState(initial);
  const [tried, setTried] = useState(initial);
  const [targetId, setTargetId] = useState(first?.id ?? "");
  useEffect(() => {
    const typing = setTimeout(() => setTried(text), TRY_AFTER_MS);
    return () => clearTimeout(typing);
  }, [text]);
  const target = targets.find((t) => t.id === targetId) ?? first;
  const input = useMemo(() => target && targetInput(target, logged), [target, logged]);
  return (
    <>
      <Field
        label="Transformation to try"
        hint={
          <>
            A JavaScript function <code>(request) =&gt; request</code> over <code>path</code>,{" "}
            <code>query</code>, <code>headers</code> and <code>body</code>; <code>null</code> drops
            the call. Run in the sandbox deliveries use ({TRANSFORM_LIMITS.runMs} ms,{" "}
            {TRANSFORM_LIMITS.memoryBytes / 1024 / 1024} MiB).
          </>
        }
      >
        {(control) => (
          <CodeArea control={control} name="transform" text={text} onText={setText} maxRows={16} />
        )}
      </Field>
      {targets.length > 1 && (
        <Field label="As handed to" hint="Its URL's path and query, and its headers, go in.">
          {(control) => (
            <select {...control} value={targetId} onChange={(e) => setTargetId(e.target.value)}>
              {targets.map((t) => (
                <option key={t.id} value={t.id}>
                  {t.name}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      <div role="status" data-testid="transform-verdict">
        {input && tried.trim() !== "" ? (
          <TransformOutcome source={tried} input={input} />
        ) : (
          <p className="muted">empty: the call goes as it came</p>
        )}
      </div>
    </>
  );
}
