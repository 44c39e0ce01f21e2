/**
 * The codec endpoint under `/codec`: Temporal's Codec Server protocol, so Temporal's UI and CLI
 * show operators the payloads Relay sealed (core/payload-codec.ts). POST `.../encode` and
 * `.../decode` take and answer `{"payloads": [{metadata, data}]}` in protobuf's JSON form; only
 * the last path segment counts, so `/codec/decode` and `/codec/{namespace}/decode` are one.
 *
 * Operators only: the admin token, the operator token (RELAY_OPERATOR_TOKEN, which opens nothing
 * else), or a session cookie one of them bought at `/codec/session`, since the UI calls from
 * the browser and sends cookies, not tokens. A member token is refused like a wrong one. CORS
 * lets the Temporal UI's origin alone read the answers.
 */
import { z } from "zod";
import { RelayError } from "../core/errors.ts";
import { type OperatorSessions, SESSION_SECONDS } from "../core/operator-session.ts";
import {
  type Payload,
  type PayloadCipher,
  payloadFromJson,
  payloadToJson,
  UnknownPayloadKey,
} from "../core/payload-codec.ts";
import { hashSecret, timingSafeEqual } from "../core/secrets.ts";
import type { EndedSessions } from "../store/codec-sessions.ts";
import { parseInput } from "./api/validation.ts";
import { bearerToken } from "./auth.ts";
import { signInPage, signInPagePolicy } from "./codec-page.ts";
import { toHttpError } from "./errors.ts";
import { observeCall } from "./observability.ts";
import type { Req, Res } from "./panel.ts";
import { readJson, readText } from "./rest/read-body.ts";

/** A history's payloads run to a few MB each: a call may carry this much (docs/security.md). */
export const CODEC_MAX_BODY_BYTES = 16 * 1024 * 1024;
/** Payloads one call may carry; the UI and the CLI send an event's worth at a time. */
export const CODEC_MAX_PAYLOADS = 1000;
/** The sign-in form's body: a token. */
const FORM_MAX_BYTES = 4096;

const SESSION_COOKIE = "relay_codec_session";

export interface CodecSettings {
  cipher: PayloadCipher;
  sessions: OperatorSessions;
  /** Sessions signed out before their expiry: refused by every control plane. */
  ended: EndedSessions;
  /** SHA-256 of each token that opens the endpoint: the admin's, and the operator's if set. */
  operatorTokenHashes: Uint8Array[];
  /** The only origin whose pages may read the answers: the Temporal UI's. */
  uiOrigin: string;
}

const codecBody = z.object({
  payloads: z
    .array(
      z.object({
        metadata: z.record(z.string(), z.string()).optional(),
        data: z.string().optional(),
      }),
    )
    .max(CODEC_MAX_PAYLOADS, `at most ${CODEC_MAX_PAYLOADS} payloads per call`),
});

interface Answer {
  status: number;
  headers?: Record<string, string>;
  body?: string;
}

const json = (status: number, value: unknown, headers: Record<string, string> = {}): Answer => ({
  status,
  headers: { "content-type": "application/json", ...headers },
  body: JSON.stringify(value),
});

/** Answers every request under `/codec` and says so; false leaves the rest to the API. */
export function codecHandler(settings: CodecSettings) {
  const isOperatorToken = async (token: string) => {
    const hash = await hashSecret(token);
    // Every hash compared, so the time says nothing of which one matched.
    const matches = settings.operatorTokenHashes.map((known) => timingSafeEqual(hash, known));
    return matches.includes(true);
  };

  /** The caller is an operator by its token, or else by its session; anyone else is 401. */
  async function requireOperator(req: Req): Promise<void> {
    const token = bearerToken(req.headers.authorization);
    const session = cookieValue(req.headers.cookie, SESSION_COOKIE);
    const allowed = token ? await isOperatorToken(token) : (await liveSession(session)) !== null;
    if (!allowed) throw new RelayError("unauthenticated", "missing or invalid token");
  }

  /** When the session `value` expires; null when it is none, is over, or was signed out. */
  async function liveSession(value: string | null): Promise<Date | null> {
    const expiresAt = value ? await settings.sessions.expiresAt(value, new Date()) : null;
    return expiresAt && value && !(await settings.ended.isEnded(value)) ? expiresAt : null;
  }

  async function transcode(req: Req, operation: "encode" | "decode"): Promise<Answer> {
    await requireOperator(req);
    const { payloads } = parseInput(codecBody, await readJson(req, CODEC_MAX_BODY_BYTES));
    const parsed = payloads.map((payload, i) => {
      try {
        return payloadFromJson(payload);
      } catch {
        throw new RelayError("bad_request", `payloads.${i}: metadata and data must be base64`);
      }
    });
    // An operator's seal reads in the UI and is never a worker's input (core/payload-codec.ts).
    const transcoded = (payload: Payload) =>
      operation === "encode"
        ? settings.cipher.encodeForOperator([payload])
        : settings.cipher.decode([payload]);
    const done = await Promise.all(
      parsed.map((payload, i) =>
        transcoded(payload).catch((cause: unknown) => {
          throw new RelayError(
            "validation_failed",
            cause instanceof UnknownPayloadKey
              ? `payloads.${i}: sealed with key '${cause.keyId}', which this deployment does not have (RELAY_PAYLOAD_KEYS)`
              : `payloads.${i}: does not open (altered, or sealed by another deployment)`,
          );
        }),
      ),
    );
    return json(200, { payloads: done.flat().map(payloadToJson) });
  }

  /** Sign-in: the token in Authorization (an API client), or in the page's form. */
  async function signIn(req: Req): Promise<Answer> {
    const fromForm = isForm(req);
    if (fromForm) refuseCrossSite(req);
    const token = fromForm
      ? new URLSearchParams(await readText(req, FORM_MAX_BYTES)).get("token")
      : bearerToken(req.headers.authorization);
    if (!token || !(await isOperatorToken(token))) {
      if (!fromForm) throw new RelayError("unauthenticated", "missing or invalid token");
      return page(401, null, "That is not the admin or the operator token.");
    }
    const session = await settings.sessions.issue(new Date());
    const cookie = sessionCookie(req, session.value, SESSION_SECONDS);
    if (fromForm) return { status: 303, headers: { location: "/codec", "set-cookie": cookie } };
    return json(200, { expiresAt: session.expiresAt.toISOString() }, { "set-cookie": cookie });
  }

  /**
   * Sign-out: the session ends for every control plane (a copy of the cookie opens nothing any
   * more), and the cookie is dropped (DELETE, or the page's form).
   */
  async function signOut(req: Req, fromForm: boolean): Promise<Answer> {
    if (fromForm) refuseCrossSite(req);
    const session = cookieValue(req.headers.cookie, SESSION_COOKIE);
    const expiresAt = await liveSession(session);
    if (session && expiresAt) await settings.ended.end(session, expiresAt);
    const cookie = sessionCookie(req, "", 0);
    return fromForm
      ? { status: 303, headers: { location: "/codec", "set-cookie": cookie } }
      : { status: 204, headers: { "set-cookie": cookie } };
  }

  async function signInState(req: Req): Promise<Answer> {
    return page(200, await liveSession(cookieValue(req.headers.cookie, SESSION_COOKIE)));
  }

  async function answer(req: Req, path: string): Promise<[route: string, Answer]> {
    const method = req.method ?? "GET";
    if (path === "/codec") {
      if (method === "GET" || method === "HEAD") return ["GET /codec", await signInState(req)];
    } else if (path === "/codec/session") {
      if (method === "POST") return ["POST /codec/session", await signIn(req)];
      if (method === "DELETE") return ["DELETE /codec/session", await signOut(req, false)];
    } else if (path === "/codec/sign-out") {
      if (method === "POST") return ["POST /codec/sign-out", await signOut(req, true)];
    } else {
      const operation = path.split("/").pop();
      if (operation !== "encode" && operation !== "decode") {
        throw new RelayError("not_found", `no route ${path}`);
      }
      const route = `${method} /codec/${operation}`;
      if (method === "OPTIONS") return [route, preflight(req, settings.uiOrigin)];
      if (method === "POST") return [route, await transcode(req, operation)];
    }
    throw new RelayError("method_not_allowed", `${method} is not allowed here`);
  }

  return async (req: Req, res: Res): Promise<boolean> => {
    const path = URL.parse(req.url ?? "/", "http://control")?.pathname ?? "/";
    if (path !== "/codec" && !path.startsWith("/codec/")) return false;
    const started = performance.now();
    let route = "unmatched";
    let result: Answer;
    try {
      [route, result] = await answer(req, path);
    } catch (cause) {
      const { status, body } = toHttpError(cause);
      result = { status, headers: { "content-type": "application/json" }, body };
    }
    // The UI reads refusals too, so its origin is allowed on every answer.
    if (req.headers.origin === settings.uiOrigin) {
      res.setHeader("access-control-allow-origin", settings.uiOrigin);
      res.setHeader("access-control-allow-credentials", "true");
    }
    res.setHeader("vary", "Origin");
    res.writeHead(result.status, result.headers ?? {});
    res.end(result.body ?? "");
    observeCall("rest", route, result.status, (performance.now() - started) / 1000);
    return true;
  };
}

function page(status: number, signedInUntil: Date | null, problem?: string): Answer {
  return {
    status,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "content-security-policy": signInPagePolicy,
      "referrer-policy": "no-referrer",
    },
    body: signInPage({ signedInUntil, ...(problem && { problem }) }),
  };
}

/** A preflight: what the UI's calls send is allowed, for its origin only. */
function preflight(req: Req, uiOrigin: string): Answer {
  if (req.headers.origin !== uiOrigin) return { status: 204 };
  return {
    status: 204,
    headers: {
      "access-control-allow-methods": "POST",
      "access-control-allow-headers": "content-type, x-namespace, authorization",
      "access-control-max-age": "600",
    },
  };
}

const isForm = (req: Req) =>
  (req.headers["content-type"] ?? "").toLowerCase().startsWith("application/x-www-form-urlencoded");

/** A form posted from another site is not the operator's own doing. */
function refuseCrossSite(req: Req): void {
  if (req.headers["sec-fetch-site"] === "cross-site") {
    throw new RelayError("forbidden", "sign in from the codec endpoint's own page");
  }
}

/**
 * The session cookie: only the codec's paths get it, no script reads it, no other site's request
 * carries it, and it is Secure when the control plane is reached over https (a TLS proxy says
 * so in X-Forwarded-Proto; the flag only narrows where the browser sends it).
 */
function sessionCookie(req: Req, value: string, maxAge: number): string {
  const https =
    String(req.headers["x-forwarded-proto"] ?? "")
      .split(",")[0]
      ?.trim() === "https";
  return `${SESSION_COOKIE}=${value}; Path=/codec; Max-Age=${maxAge}; HttpOnly; SameSite=Strict${https ? "; Secure" : ""}`;
}

function cookieValue(header: string | undefined, name: string): string | null {
  for (const part of (header ?? "").split(";")) {
    const [key, ...value] = part.trim().split("=");
    if (key === name) return value.join("=");
  }
  return null;
}
