/**
 * `npm run check:api`: Schemathesis (pinned, dev/python-tools.txt) against a real stack it starts,
 * every check (`-c all`) on every operation of docs/openapi.json: the control plane's with an
 * owner's token, the edge's inbound call with an API key on the project's host. The deviations we
 * mean are in dev/schemathesis.toml, each with its reason; anything else it finds fails the check.
 * Not part of npm test (it takes minutes and reaches PyPI once); `-- --max-examples N` trims it.
 */
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { pythonTools } from "./python-tools.ts";
import { couldNotRun, freeStackPorts, postToControl, type Stack, startStack } from "./stack.ts";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const PROJECT = "demo";
const EDGE_OPERATION = "relayRequest";
const maxExamplesAt = process.argv.indexOf("--max-examples");
const maxExamples = maxExamplesAt > 0 ? process.argv[maxExamplesAt + 1] : undefined;

/** pytest's closing banner, `==== 2 warnings in 139.00s ====`, which Schemathesis borrows. */
const BANNER = /^=+ (.*?) =+$/;

/**
 * Runs Schemathesis with its output on ours; resolves its exit code. Its banners lose their rules:
 * CI reads a pytest-like closing line as the run's test count, and these count no test of ours.
 */
function schemathesis(st: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const config = join(ROOT, "dev/schemathesis.toml");
    const document = join(ROOT, "docs/openapi.json");
    const child = spawn(st, ["--config-file", config, "run", document, ...args], {
      cwd: dir, // its cache of examples stays out of the project
      stdio: ["ignore", "pipe", "inherit"],
    });
    createInterface({ input: child.stdout }).on("line", (line) => {
      console.log(line.replace(BANNER, "schemathesis: $1"));
    });
    child.once("error", reject);
    child.once("close", (code) => resolve(code ?? 1));
  });
}

const tools = await pythonTools();
if (!tools.ready) {
  console.log(`check:api skipped: ${tools.missing}`);
  process.exit(0);
}

const dir = await mkdtemp(join(tmpdir(), "relay-api-check-"));
let stack: Stack | undefined;
let failed = false;
try {
  const ports = await freeStackPorts();
  stack = await startStack({ dir, ports, output: join(dir, "stack.log") });
  const admin = stack.secrets.adminToken;
  // The project every case names (dev/schemathesis.toml), and one for the deletes to remove.
  for (const slug of [PROJECT, "scratch"]) {
    await postToControl(stack, admin, "/projects", { slug, name: "API check", plan: "paid" });
    await postToControl(stack, admin, `/projects/${slug}/lines`, { key: "v1" });
    await postToControl(stack, admin, `/projects/${slug}/lines/v1/endpoints`, {
      path: "orders",
      targets: [{ name: "nowhere", targetUrl: "http://127.0.0.1:9/hook" }],
    });
  }
  // The edge's own endpoint: the control plane's cases change `orders` (a sync target's refusal
  // would be the 502 the document states, which Schemathesis counts as a server error).
  await postToControl(stack, admin, `/projects/${PROJECT}/lines/v1/endpoints`, {
    path: "inbound",
    targets: [{ name: "nowhere", targetUrl: "http://127.0.0.1:9/hook" }],
  });
  const { plaintext: apiKey } = await postToControl<{ plaintext: string }>(
    stack,
    admin,
    `/projects/${PROJECT}/keys`,
    { name: "api-check", mode: "live" },
  );
  // A key and a member of the project's own for the cases about one (dev/schemathesis.toml).
  const { key } = await postToControl<{ key: { id: string } }>(
    stack,
    admin,
    `/projects/${PROJECT}/keys`,
    {
      name: "cases",
      mode: "test",
    },
  );
  const { member } = await postToControl<{ member: { id: string } }>(
    stack,
    admin,
    `/projects/${PROJECT}/members`,
    { name: "cases", role: "editor" },
  );
  process.env.RELAY_CHECK_KEY_ID = key.id;
  process.env.RELAY_CHECK_MEMBER_ID = member.id;
  // Every check runs (Schemathesis's default, as `-c all`); named on the command line, they would
  // override the deviations dev/schemathesis.toml turns off per operation.
  const common = maxExamples ? ["--max-examples", maxExamples] : [];
  // As the admin: an owner of every project, and the only caller of the admin's operations.
  const control = await schemathesis(tools.bin("st"), [
    ...common,
    ...["--url", stack.controlUrl, "--exclude-operation-id", EDGE_OPERATION],
    ...["-H", `Authorization: Bearer ${admin}`],
  ]);
  const edge = await schemathesis(tools.bin("st"), [
    ...common,
    ...["--url", stack.edgeUrl, "--include-operation-id", EDGE_OPERATION],
    ...["-H", `Authorization: Bearer ${apiKey}`, "-H", `Host: ${PROJECT}.localhost:${ports.edge}`],
  ]);
  failed = control !== 0 || edge !== 0;
} catch (error) {
  failed = true;
  await couldNotRun(error, join(dir, "stack.log"));
} finally {
  await stack?.stop();
  await rm(dir, { recursive: true, force: true });
}
process.exitCode = failed ? 1 : 0;
