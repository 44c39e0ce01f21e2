/**
 * The management API as REST JSON (docs/design.md's table): the router, which answers the ops
 * paths, finds the route a request names, authenticates its caller, decodes its parameters and
 * body, and runs it. Every route calls the same operation as its Connect twin; errors leave
 * through `toHttpError` only.
 */
import { RelayError } from "../../core/errors.ts";
import { opsHandler } from "../../core/ops.ts";
import { answerOps } from "../../platform/ops-http.ts";
import { temporalAnswers } from "../../platform/temporal.ts";
import { postgresAnswers } from "../../store/db.ts";
import type { ControlApp } from "../app.ts";
import { authenticate, type Caller } from "../auth.ts";
import { toHttpError } from "../errors.ts";
import { observeCall, registry } from "../observability.ts";
import type { Req, Res } from "../panel.ts";
import { OtherAnswer, readsBody } from "./contract.ts";
import { devClockRoutes } from "./dev-clock.ts";
import { readJson } from "./read-body.ts";
import { routes } from "./routes.ts";

/**
 * A path segment or query value, URL-decoded. A malformed escape or a control character (NUL,
 * which Postgres cannot store in text) is the caller's mistake: 400 before any lookup.
 */
function decodeParam(name: string, raw: string, decode: (raw: string) => string): string {
  let value: string;
  try {
    value = decode(raw);
  } catch {
    throw new RelayError("bad_request", `${name}: malformed percent-encoding`);
  }
  if (/\p{Cc}/u.test(value)) throw new RelayError("bad_request", `${name}: control character`);
  return value;
}

export function restHandler(app: ControlApp, maxBodyBytes: number) {
  const { deps, credentials } = app;
  const ops = opsHandler({
    // Reads, cancels and replays need Temporal as well as Postgres.
    checks: {
      postgres: () => postgresAnswers(deps.sql),
      temporal: async () => temporalAnswers(await deps.temporal()),
    },
    metrics: () => registry.metrics(),
    metricsContentType: registry.contentType,
    metricsToken: app.metricsToken,
  });
  // Without RELAY_DEV_CLOCK the dev-clock routes do not exist, whatever the caller's token.
  const served = app.devClock ? routes : routes.filter((r) => !devClockRoutes.includes(r));
  return async function handleRest(req: Req, res: Res): Promise<void> {
    const started = performance.now();
    let status = 200;
    let body: string | undefined;
    /** On a 405: the methods the path takes (RFC 9110 asks for them). */
    let allow: string | undefined;
    let routeName = "unmatched";
    try {
      const url = URL.parse(req.url ?? "/", "http://control");
      if (!url) throw new RelayError("bad_request", "malformed request target");
      if (await answerOps(ops, req, res)) return;
      const matches = served
        .map((r) => ({ r, match: r.pattern.exec(url.pathname) }))
        .filter((m) => m.match !== null);
      if (matches.length === 0) throw new RelayError("not_found", `no route ${url.pathname}`);
      const found = matches.find((m) => m.r.method === req.method);
      if (!found?.match) {
        allow = [...new Set(matches.map((m) => m.r.method))].join(", ");
        throw new RelayError("method_not_allowed", `${req.method} is not allowed here`);
      }
      routeName = found.r.name;
      const caller: Caller =
        found.r.contract.access === "public"
          ? { kind: "anonymous" }
          : await authenticate(deps, credentials, req.headers.authorization);
      const params = Object.fromEntries(
        Object.entries(found.match.groups ?? {}).map(([k, v]) => [
          k,
          decodeParam(k, v, decodeURIComponent),
        ]),
      );
      const query = Object.fromEntries(
        [...url.searchParams].map(([k, v]) => [k, decodeParam(k, v, String)]),
      );
      const result = await found.r.handle({
        app,
        ctx: { ...deps, caller },
        params,
        body: readsBody(req.method ?? "") ? await readJson(req, maxBodyBytes) : undefined,
        query,
      });
      const other = result instanceof OtherAnswer && found.r.contract.other;
      status = other ? other.status : found.r.status;
      const answer = result instanceof OtherAnswer ? result.value : result;
      body = status === 204 ? undefined : JSON.stringify(answer);
    } catch (cause) {
      ({ status, body } = toHttpError(cause));
    }
    res.writeHead(status, {
      ...(body !== undefined && { "content-type": "application/json" }),
      ...(status === 405 && allow && { allow }),
    });
    res.end(body ?? "");
    observeCall("rest", routeName, status, (performance.now() - started) / 1000);
  };
}
