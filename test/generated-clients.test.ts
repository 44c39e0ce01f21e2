/**
 * docs/openapi.json as a new user meets it (issue 29): the clients two real generators make of it
 * at their default settings are complete and type-check, and a first script through each creates
 * an endpoint and reads a request back. openapi-typescript and openapi-fetch are dev dependencies;
 * openapi-python-client is pinned in dev/python-tools.txt (skipped, and said so, without Python).
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { pythonTools } from "../dev/python-tools.ts";
import { finishedLog, projectWithEndpoint, relay, stack, targetServer } from "./helpers.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DOCUMENT = join(ROOT, "docs/openapi.json");
const run = promisify(execFile);

let dir: string;
let env: Record<string, string>;
let target: Awaited<ReturnType<typeof targetServer>>;

beforeAll(async () => {
  // Inside the project, so the generated TypeScript resolves openapi-fetch and Node's types.
  await mkdir(join(ROOT, ".relay"), { recursive: true });
  dir = await mkdtemp(join(ROOT, ".relay/generated-clients-"));
  target = await targetServer();
  const project = await projectWithEndpoint([{ name: "receiver", targetUrl: target.url }]);
  const call = await relay(project.slug, "/v1/hook", { key: project.key, body: '{"hello":1}' });
  expect(call.status).toBe(202);
  const requestId = String(call.headers["x-relay-request-id"]);
  await finishedLog(project, requestId);
  env = {
    ...(process.env as Record<string, string>),
    RELAY_CONTROL_URL: stack().controlUrl,
    RELAY_TOKEN: project.ownerToken,
    RELAY_PROJECT: project.slug,
    RELAY_TARGET_URL: target.url,
    RELAY_REQUEST_ID: requestId,
  };
}, 120_000);

afterAll(async () => {
  await target?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const firstScriptPrinted = (stdout: string) => JSON.parse(stdout.trim().split("\n").at(-1) ?? "");

test("openapi-typescript's types type-check (strict, no skipLibCheck) and drive openapi-fetch", async () => {
  const where = join(dir, "typescript");
  await mkdir(where);
  await run(join(ROOT, "node_modules/.bin/openapi-typescript"), [
    DOCUMENT,
    ...["--output", join(where, "relay.d.ts")],
  ]);
  await copyFile(join(ROOT, "test/clients/relay-check.ts"), join(where, "relay-check.ts"));
  const checked = await run(join(ROOT, "node_modules/.bin/tsc"), [
    ...["--noEmit", "--strict", "--target", "es2022", "--module", "nodenext"],
    ...["--types", "node", join(where, "relay.d.ts"), join(where, "relay-check.ts")],
  ]).catch((error: { stdout: string }) => ({ stdout: error.stdout, failed: true }));
  expect(checked.stdout).toBe("");

  const { stdout } = await run(process.execPath, ["--import", "tsx", "relay-check.ts"], {
    cwd: where,
    env,
  });
  expect(firstScriptPrinted(stdout)).toEqual({
    endpoint: "from-typescript",
    request: env.RELAY_REQUEST_ID,
    status: "delivered",
  });
}, 120_000);

test("openapi-python-client makes every operation, with no warning, and its client works", async (context) => {
  const tools = await pythonTools();
  if (!tools.ready) {
    console.warn(`generated Python client not tested: ${tools.missing}`);
    context.skip();
    return;
  }
  const where = join(dir, "python");
  const generated = await run(
    tools.bin("openapi-python-client"),
    ["generate", "--path", DOCUMENT, "--output-path", where],
    // Its default post-hooks call ruff, from the same environment.
    { env: { ...env, PATH: `${tools.bin("")}:${process.env.PATH}` } },
  );
  expect(generated.stdout + generated.stderr).not.toMatch(/warning|unable|cannot/i);

  const { stdout } = await run(tools.bin("python"), [join(ROOT, "test/clients/relay_check.py")], {
    env: { ...env, PYTHONPATH: where },
  });
  expect(firstScriptPrinted(stdout)).toEqual({
    endpoint: "from-python",
    request: env.RELAY_REQUEST_ID,
    status: "delivered",
  });
}, 300_000);
