/** What the integration tests share: the stack's addresses, API calls, and real target servers. */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { createRequire } from "node:module";
import type { DescService } from "@bufbuild/protobuf";
import { type Client, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, type GrpcWebTransportOptions } from "@connectrpc/connect-web";
import { Webhook } from "standardwebhooks";
import { request } from "undici";
import { inject, vi } from "vitest";
import { CREDIT_UNIT_BYTES } from "../core/billing.ts";
import type { DeliveryTarget } from "../core/model.ts";
import { logFile, ManagedProcess } from "../dev/processes.ts";
import { connectTemporal } from "../platform/temporal.ts";
import { chargeDelivery } from "../store/credits.ts";
import type { Sql } from "../store/db.ts";

export const stack = () => inject("stack");

export interface ApiAnswer<T = Record<string, unknown>> {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: T;
  text: string;
}

/** A REST call to the control plane (the stack's, unless another is named). */
export async function api<T = Record<string, unknown>>(
  token: string | null,
  method: string,
  path: string,
  body?: unknown,
  controlUrl = stack().controlUrl,
): Promise<ApiAnswer<T>> {
  const response = await request(`${controlUrl}${path}`, {
    method: method as "GET",
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { "content-type": "application/json" }),
    },
    ...(body !== undefined && { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
  const text = await response.body.text();
  return {
    status: response.statusCode,
    headers: response.headers,
    body: (text ? JSON.parse(text) : {}) as T,
    text,
  };
}

/** A control plane to set projects up on: the stack's, or a test's own stack's. */
export type ControlPlane = Pick<ReturnType<typeof stack>, "controlUrl" | "adminToken">;

let counter = 0;
/** A fresh project per test, so tests never see each other's state. */
export async function newProject(plan: "free" | "paid" = "paid", on: ControlPlane = stack()) {
  const slug = `t${Date.now().toString(36)}${(counter++).toString(36)}`;
  const created = await api(
    on.adminToken,
    "POST",
    "/projects",
    { slug, name: slug, plan },
    on.controlUrl,
  );
  if (created.status !== 201) throw new Error(`project: ${created.text}`);
  return { slug, ownerToken: created.body.ownerToken as string, controlUrl: on.controlUrl };
}

/** A target as an endpoint's create body names it: a name and a URL, the rest as defaults. */
export type TargetSpec = Pick<DeliveryTarget, "name" | "targetUrl"> &
  Partial<Omit<DeliveryTarget, "id" | "name" | "targetUrl">>;

/** A project with line `v1`, one endpoint with these targets, and a live key. */
export async function projectWithEndpoint(
  targets: TargetSpec[],
  endpoint: Record<string, unknown> = {},
  plan: "free" | "paid" = "paid",
  on: ControlPlane = stack(),
) {
  const project = await newProject(plan, on);
  const base = `/projects/${project.slug}`;
  await api(project.ownerToken, "POST", `${base}/lines`, { key: "v1" }, on.controlUrl);
  const created = await api(
    project.ownerToken,
    "POST",
    `${base}/lines/v1/endpoints`,
    { path: "hook", targets, ...endpoint },
    on.controlUrl,
  );
  if (created.status !== 201) throw new Error(`endpoint: ${created.text}`);
  return { ...project, base, key: await mintKey({ ...project, base }, "live") };
}

/** A Connect client of `service` on the stack's control plane, calling as the member `token`. */
export function memberClient<T extends DescService>(
  service: T,
  token: string,
  transport: (options: GrpcWebTransportOptions) => Transport = createConnectTransport,
): Client<T> {
  return createClient(
    service,
    transport({
      baseUrl: stack().controlUrl,
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${token}`);
          return next(req);
        },
      ],
    }),
  );
}

/** Adds `amount` to a project's live pool (the admin's POST .../credits), beyond the 100 it starts with. */
export async function grantCredits(slug: string, amount: number, on: ControlPlane = stack()) {
  const granted = await api(
    on.adminToken,
    "POST",
    `/projects/${slug}/credits`,
    { pool: "live", amount },
    on.controlUrl,
  );
  if (granted.status !== 200) throw new Error(`credits: ${granted.text}`);
}

/** A new API key's plaintext. */
export async function mintKey(
  p: { base: string; ownerToken: string; controlUrl?: string },
  mode: "live" | "test",
) {
  const minted = await api(
    p.ownerToken,
    "POST",
    `${p.base}/keys`,
    { name: mode, mode },
    p.controlUrl,
  );
  if (minted.status !== 201) throw new Error(`key: ${minted.text}`);
  return minted.body.plaintext as string;
}

/** An inbound call to the edge, addressed as `{project}.localhost`. */
export async function relay(
  project: string,
  path: string,
  options: {
    key?: string | null;
    body?: string;
    headers?: Record<string, string>;
    method?: string;
    /** Another edge than the stack's (the Deno one). */
    edge?: { edgeUrl: string; edgePort: number };
  } = {},
) {
  const { edgeUrl, edgePort } = options.edge ?? stack();
  const response = await request(`${edgeUrl}${path}`, {
    method: (options.method ?? "POST") as "POST",
    headers: {
      host: `${project}.localhost:${edgePort}`,
      ...(options.key && { authorization: `Bearer ${options.key}` }),
      ...(options.body !== undefined && { "content-type": "application/json" }),
      ...options.headers,
    },
    ...(options.body !== undefined && { body: options.body }),
  });
  const text = await response.body.text();
  return {
    status: response.statusCode,
    headers: response.headers,
    text,
    json: () => JSON.parse(text),
  };
}

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/**
 * A customer's endpoint on loopback: records every request and answers with `respond`'s status
 * (200 unless told otherwise), so tests can make it fail.
 */
export async function targetServer(
  respond: (
    received: Received,
    index: number,
  ) => { status: number; headers?: Record<string, string> } = () => ({ status: 200 }),
) {
  const received: Received[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const entry = {
        path: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        at: Date.now(),
      };
      received.push(entry);
      const answer = respond(entry, received.length - 1);
      res.writeHead(answer.status, { "content-type": "application/json", ...answer.headers });
      res.end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `http://127.0.0.1:${port}/in`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Polls until `check` returns a value, or fails after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined | null | false>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** A request's log entry once it is finished (not queued, scheduled or delivering). */
export async function finishedLog<T extends { status: string } = RequestLog>(
  p: { base: string; ownerToken: string; controlUrl?: string },
  requestId: string,
  timeoutMs?: number,
): Promise<T> {
  return eventually(async () => {
    const log = await api<T>(
      p.ownerToken,
      "GET",
      `${p.base}/requests/${requestId}`,
      undefined,
      p.controlUrl,
    );
    return (
      log.status === 200 &&
      !["queued", "scheduled", "delivering"].includes(log.body.status) &&
      log.body
    );
  }, timeoutMs);
}

export interface RequestLog {
  status: string;
  attempts: { targetName: string; statusCode: number | null; error: string | null }[];
}

/**
 * Whether a Standard Webhooks verifier (the `standardwebhooks` package) accepts `received` with
 * `secret`. Relay stamps deliveries with the stack's clock, which the shared dev clock may have
 * moved ahead of real time, so the library's five-minute window is judged at the stack's time.
 */
export async function verifiesSignature(secret: string, received: Received): Promise<boolean> {
  const clock = await api(stack().adminToken, "POST", "/admin/clock", { advanceSeconds: 0 });
  vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + (clock.body.offsetMs as number) });
  try {
    new Webhook(secret).verify(received.body, received.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  } finally {
    vi.useRealTimers();
  }
}

/**
 * Where processes a test starts beside the stack write: the stack's own log, so a failure's
 * output is in one place and the secrets-at-rest scan reads it too.
 */
export const stackLog = () => logFile(stack().logFile);

/**
 * A Node edge beside the stack's, on `port`, following the stack's control plane and starting
 * workflows on its Temporal; `env` adds or overrides settings. Its lines go to the stack's log.
 */
export function extraEdge(name: string, port: number, env: Record<string, string> = {}) {
  return new ManagedProcess(
    { name, entry: "edge/main.ts", readyLine: "edge listening", env: edgeEnv(port, env) },
    stackLog(),
  );
}

/** The edge under Deno (the `deno` npm package's binary) with `env`; its lines go to `output`. */
export function denoEdgeProcess(
  env: Record<string, string>,
  output: ConstructorParameters<typeof ManagedProcess>[1],
) {
  return new ManagedProcess(
    {
      name: "edge-deno",
      // The binary itself: node_modules/.bin/deno is a Node wrapper that would survive a kill of
      // its own and leave Deno running.
      command: [
        createRequire(import.meta.url)("deno/install_api.cjs").runInstall() as string,
        "run",
        "--allow-net",
        "--allow-env",
        "--allow-read",
        // pino and prom-client read the host name when loaded.
        "--allow-sys=hostname",
      ],
      entry: "edge/main.deno.ts",
      readyLine: '"runtime":"deno"',
      env,
    },
    output,
  );
}

/** A Temporal client of the stack's, with Relay's payload codec: it reads what Relay sealed. */
export const relayTemporal = () =>
  connectTemporal({
    TEMPORAL_ADDRESS: stack().temporalAddress,
    TEMPORAL_NAMESPACE: "default",
    RELAY_ENCRYPTION_KEY: stack().encryptionKey,
  });

/** What another control plane, worker or edge beside the stack's needs to join it. */
export const stackEnv = () => ({
  DATABASE_URL: stack().databaseUrl,
  TEMPORAL_ADDRESS: stack().temporalAddress,
  TEMPORAL_HTTP_ADDRESS: stack().temporalHttpAddress,
  RELAY_ADMIN_TOKEN: stack().adminToken,
  RELAY_EDGE_TOKEN: stack().edgeToken,
  RELAY_ENCRYPTION_KEY: stack().encryptionKey,
  RELAY_ALLOW_PRIVATE_TARGETS: "1",
  RELAY_EDGE_DOMAIN: `localhost:${stack().edgePort}`,
});

/** An extra edge's settings: on `port`, following the stack's control plane and Temporal. */
export function edgeEnv(port: number, env: Record<string, string> = {}): Record<string, string> {
  return {
    RELAY_EDGE_PORT: String(port),
    RELAY_CONTROL_URL: stack().controlUrl,
    RELAY_EDGE_TOKEN: stack().edgeToken,
    TEMPORAL_HTTP_ADDRESS: stack().temporalHttpAddress,
    ...env,
  };
}

/** Spends a project's live pool down to `left` of RELAY_INITIAL_CREDITS (100 in tests). */
export const spendDownTo = (sql: Sql, slug: string, left: number) =>
  sql.begin((tx) =>
    chargeDelivery(tx, {
      project: slug,
      pool: "live",
      requestId: `req_setup_${slug}`,
      targetId: "t",
      bytes: (100 - left) * CREDIT_UNIT_BYTES,
    }),
  );
