import { RelayError } from "../../core/errors.ts";
import type { EdgeDeps } from "../deps.ts";
import type { EndpointRuntime } from "../endpoints.ts";
import type { Authenticated, Routed, Step } from "../pipeline.ts";

/** The endpoint `/{line}/{endpoint}` names in the project, with its compiled rules (404 if none). */
export function endpoint(
  state: EdgeDeps["state"],
  runtime: EndpointRuntime,
): Step<Authenticated, Routed> {
  return async function endpoint(envelope, next) {
    const route = envelope.route ?? new URL(envelope.request.url).pathname;
    const [line, path, ...rest] = route.split("/").slice(1).map(decodeSegment);
    const found =
      rest.length === 0 && line != null && path != null
        ? await state.endpoint(envelope.project, line, path)
        : null;
    if (!found) throw new RelayError("not_found", "no such line or endpoint");
    const compiled = runtime.compile(found.endpoint);
    return next(Object.assign(envelope, { ...found, compiled }));
  };
}

/** A segment that does not decode matches no line or endpoint. */
function decodeSegment(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}
