/**
 * "Try a filter" on a request's page: the endpoint's targets as they are now, each with whether
 * its filter matches this request as logged, and a filter to write and try on it. Matching runs
 * in the browser with the edge's own matcher (core/filter.ts) on the logged body and headers;
 * nothing is sent to the control plane and nothing is saved.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { useQuery } from "@connectrpc/connect-query";
import { useEffect, useMemo, useState } from "react";
import { decodeBody } from "../../../core/delivery.ts";
import { type FilterInput, filterInput, matchesFilter } from "../../../core/filter.ts";
import { filterProblems } from "../../../core/filter-rules.ts";
import { BodyEncoding, type Request } from "../../../gen/relay/v1/requests_pb.ts";
import { EndpointService, type Target } from "../../../gen/relay/v1/routing_pb.ts";
import { problemOf } from "../errors.ts";
import { projectPath, useProject } from "../project.ts";
import { Link } from "../router.tsx";
import { Field, StatusBadge } from "../ui.tsx";

/** How long typing pauses before the typed filter is tried. */
const TRY_AFTER_MS = 300;

const utf8Encoder = new TextEncoder();

/** For a request whose log kept its headers or body (the page shows it only then). */
export function FilterConsole({ request }: { request: Request }) {
  const { project } = useProject();
  const endpoint = useQuery(EndpointService.method.getEndpoint, {
    project,
    line: request.line,
    path: request.endpoint,
  });
  const unread = endpoint.error ? problemOf(endpoint.error) : null;
  const logged = useMemo(() => loggedFilterInput(request), [request]);
  const targets = endpoint.data?.endpoint?.targets;
  return (
    <section className="card" aria-label="Try a filter">
      <h2>Try a filter</h2>
      <p className="hint">
        Runs here, on this request as logged; saving a filter is on the{" "}
        <Link to={projectPath(project, "endpoints", request.line, request.endpoint)}>
          endpoint's page
        </Link>
        .
      </p>
      {targets ? (
        <TargetVerdicts targets={targets} logged={logged} />
      ) : unread ? (
        <p className="muted">
          {unread.kind === "not-found"
            ? `${request.line}/${request.endpoint} no longer exists: it has no targets to show.`
            : `Its targets could not be read: ${unread.message}`}
        </p>
      ) : (
        <p className="loading" role="status">
          Loading…
        </p>
      )}
      {(targets || unread) && (
        // Keyed: another request's page starts from its own endpoint's filter.
        <FilterTrial
          key={request.requestId}
          initial={firstFilterText(targets ?? [])}
          logged={logged}
        />
      )}
    </section>
  );
}

/** The input a filter saw when this request came in: its body and its forwarded headers. */
function loggedFilterInput({ body, headers }: Request): FilterInput {
  const bytes =
    body?.encoding === BodyEncoding.BASE64
      ? decodeBody(body.text)
      : utf8Encoder.encode(body?.text ?? "");
  return filterInput(bytes, new Headers(headers?.values));
}

/** Each target as it is now: its filter, and whether that filter takes this request. */
function TargetVerdicts({ targets, logged }: { targets: Target[]; logged: FilterInput }) {
  return (
    <ul className="plain" data-testid="filter-targets">
      {targets.map((t) => (
        <li key={t.id} data-target={t.name}>
          <strong>{t.name}</strong>:{" "}
          {t.filter ? <code>{JSON.stringify(t.filter)}</code> : "no filter: every call"}{" "}
          <StatusBadge
            status={!t.filter || matchesFilter(t.filter, logged) ? "matches" : "skips it"}
          />
        </li>
      ))}
    </ul>
  );
}

/** The first target's filter, pretty-printed, to start from; `{}` when no target has one. */
function firstFilterText(targets: Target[]): string {
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

/** A filter typed here and tried on the logged request once typing pauses. */
function FilterTrial({ initial, logged }: { initial: string; logged: FilterInput }) {
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
            (lowercase names); <code>{"{}"}</code> matches every call.
          </>
        }
      >
        {(control) => (
          <textarea
            {...control}
            name="filter"
            className="code"
            rows={Math.min(12, Math.max(3, text.split("\n").length + 1))}
            spellCheck={false}
            value={text}
            onChange={(e) => setText(e.target.value)}
          />
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
