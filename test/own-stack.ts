/**
 * A stack of a test file's own (its processes to kill and restart), started before its tests
 * and stopped after them, with a REST call to its control plane.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { afterAll, beforeAll } from "vitest";
import { freeStackPorts, type Stack, startStack } from "../dev/stack.ts";
import { temporalServerKindFromEnv } from "../dev/temporal-server.ts";

export function ownStack(name: string, env: Record<string, string> = {}) {
  let stack: Stack | undefined;
  let dir: string | undefined;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), `relay-${name}-`));
    stack = await startStack({
      dir,
      ports: await freeStackPorts(),
      output: join(dir, "stack.log"),
      temporalServer: temporalServerKindFromEnv(),
      env,
    });
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  const started = (): Stack => {
    if (!stack) throw new Error("the stack has not started");
    return stack;
  };
  /** A REST call to the stack's control plane as `token`, its answer's JSON. */
  async function call(token: string, method: string, path: string, body?: unknown) {
    const response = await request(`${started().controlUrl}${path}`, {
      method: method as "GET",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    return (await response.body.json()) as Record<string, unknown>;
  }
  /** A paid project `slug` with line v1, endpoint `hook` to `targetUrl`, and a live key. */
  async function projectWithTarget(
    slug: string,
    targetUrl: string,
    timeoutSeconds: number,
    deliveryMode: "async" | "sync" = "async",
  ) {
    const created = await call(started().secrets.adminToken, "POST", "/projects", {
      slug,
      name: slug,
      plan: "paid",
    });
    const ownerToken = created.ownerToken as string;
    await call(ownerToken, "POST", `/projects/${slug}/lines`, { key: "v1" });
    await call(ownerToken, "POST", `/projects/${slug}/lines/v1/endpoints`, {
      path: "hook",
      targets: [{ name: "t", targetUrl, timeoutSeconds, deliveryMode }],
    });
    const minted = await call(ownerToken, "POST", `/projects/${slug}/keys`, {
      name: "k",
      mode: "live",
    });
    return { ownerToken, key: minted.plaintext as string };
  }
  return { stack: started, call, projectWithTarget };
}
