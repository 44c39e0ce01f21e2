/**
 * The deployment examples in deploy/ (docs/deployment.md) stay usable: systemd accepts every unit
 * without a word, every variable their environment files name is documented for that process,
 * each file is a complete setting of its process once its placeholders are filled (and is refused
 * until they are), the edge's holds none of the secrets it must never get, and Temporal's own
 * server knows every key of the cluster's dynamic config. Reads files and runs two tools; needs
 * no stack.
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { expect, test } from "vitest";
import { loadControlConfig } from "../control/config.ts";
import { loadEdgeConfig } from "../edge/config.ts";
import { loadWorkerConfig } from "../workflows/config.ts";
import { cliCacheDir } from "./temporal.ts";
import { temporalDynamicConfig } from "./temporal-config.ts";
import { TEMPORAL_SERVER_VERSION } from "./temporal-server.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const systemdDir = join(root, "deploy", "systemd");
const configurationDoc = readFileSync(join(root, "docs/configuration.md"), "utf8");
/** What an example file holds where a secret goes: no process accepts it as one. */
const PLACEHOLDER = "change-me";
const UNIT_NODE = "/usr/bin/node";

/** Each process's unit, its environment file, and how that process reads its environment. */
const processes = {
  edge: { name: "edge", read: loadEdgeConfig },
  control: { name: "control", read: loadControlConfig },
  worker: { name: "worker", read: loadWorkerConfig },
  migrate: {
    name: "`relay migrate`",
    // cli/relay.ts reads DATABASE_URL alone, as a URL.
    read: (env: Record<string, string | undefined>) => new URL(env.DATABASE_URL ?? ""),
  },
} as const;

/** KEY=VALUE lines as systemd's EnvironmentFile= reads them (no quotes are used in ours). */
function settings(file: string): Record<string, string> {
  return Object.fromEntries(
    readFileSync(file, "utf8")
      .split("\n")
      .filter((line) => /^[A-Z_][A-Z0-9_]*=/.test(line))
      .map((line) => [line.slice(0, line.indexOf("=")), line.slice(line.indexOf("=") + 1)]),
  );
}

/** Every variable a file names, set or only shown in a comment. */
function mentioned(file: string): string[] {
  return [...new Set(readFileSync(file, "utf8").match(/\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+(?==)/g))];
}

/** The processes docs/configuration.md's table says read `variable`, or null when it has no row. */
function documentedProcesses(variable: string): string | null {
  const row = configurationDoc
    .split("\n")
    .find((line) => line.startsWith("|") && line.split("|")[1]?.includes(`\`${variable}\``));
  return row?.split("|")[2] ?? null;
}

/** A value each process accepts, for the placeholder of `variable`. */
function filled(variable: string): string {
  const isHexSecret = variable === "RELAY_ENCRYPTION_KEY" || variable === "RELAY_PAYLOAD_KEYS";
  return isHexSecret ? "ab".repeat(32) : "t".repeat(40);
}

const envFile = (process: string) => join(systemdDir, `${process}.env.example`);

test("there is a unit and an environment file per process, and nothing else", () => {
  const expected = Object.keys(processes).flatMap((process) => [
    `relay-${process}.service`,
    `${process}.env.example`,
  ]);
  expect(readdirSync(systemdDir).sort()).toEqual(expected.sort());
});

test("systemd-analyze verify accepts every unit without a warning", async () => {
  // The units run /usr/bin/node, where Debian's package puts it; verify checks that ExecStart's
  // program exists, so where this node is elsewhere, copies name this one instead.
  const dir = await mkdtemp(join(tmpdir(), "relay-units-"));
  try {
    const units = readdirSync(systemdDir).filter((name) => name.endsWith(".service"));
    for (const unit of units) {
      const text = readFileSync(join(systemdDir, unit), "utf8");
      expect(text, unit).toContain(`ExecStart=${UNIT_NODE} `);
      await writeFile(join(dir, unit), text.replaceAll(UNIT_NODE, process.execPath));
    }
    const verified = await promisify(execFile)(
      "systemd-analyze",
      ["verify", ...units.map((unit) => join(dir, unit))],
      { cwd: dir },
    ).catch((error: { code?: string; stdout?: string; stderr?: string }) => {
      if (error.code === "ENOENT") throw new Error("systemd-analyze is missing: install systemd");
      return error;
    });
    // verify exits 0 on an unknown key, which it only warns of: any output is a failure.
    expect(`${verified.stdout}${verified.stderr}`).toBe("");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test.each(Object.entries(processes))(
  "every variable %s's environment file names is documented for it",
  (process, { name }) => {
    const undocumented = mentioned(envFile(process)).filter(
      (variable) => !documentedProcesses(variable)?.includes(name),
    );
    expect(undocumented).toEqual([]);
  },
);

test.each(Object.entries(processes))(
  "%s's environment file is refused as shipped and accepted with its secrets filled in",
  (process, { read }) => {
    const env = settings(envFile(process));
    const placeholders = Object.keys(env).filter((variable) => env[variable] === PLACEHOLDER);
    if (process !== "migrate") {
      expect(placeholders.length, "placeholders").toBeGreaterThan(0);
      expect(() => read(env)).toThrow();
    }
    const complete = { ...env, ...Object.fromEntries(placeholders.map((v) => [v, filled(v)])) };
    expect(() => read(complete)).not.toThrow();
  },
);

test("the edge gets no secret that opens what it must not read", () => {
  const edge = mentioned(envFile("edge"));
  for (const secret of [
    "RELAY_ENCRYPTION_KEY",
    "RELAY_PAYLOAD_KEYS",
    "DATABASE_URL",
    "RELAY_ADMIN_TOKEN",
    "RELAY_OPERATOR_TOKEN",
  ]) {
    expect(edge).not.toContain(secret);
  }
  expect(mentioned(envFile("worker"))).not.toContain("RELAY_ADMIN_TOKEN");
  expect(Object.keys(settings(envFile("migrate")))).toEqual(["DATABASE_URL"]);
});

const clusterDynamicConfig = join(root, "deploy", "temporal", "dynamic-config.yaml");

test("the cluster's dynamic config turns fairness on as the dev stack's does", () => {
  const file = readFileSync(clusterDynamicConfig, "utf8");
  for (const key of ["matching.useNewMatcher", "matching.enableFairness"]) {
    expect(temporalDynamicConfig[key], key).toBe(true);
    // One unconstrained value: every namespace, every task queue.
    expect(file).toContain(`\n${key}:\n  - value: true\n`);
  }
});

// Temporal's own server is built by RELAY_TEMPORAL_SERVER=postgres (minutes with Go): used here
// only when it is already there.
const server = join(cliCacheDir, `temporal-server-${TEMPORAL_SERVER_VERSION}`, "server");
test.runIf(existsSync(server))(
  `Temporal's server ${TEMPORAL_SERVER_VERSION} knows every key of the cluster's dynamic config`,
  async () => {
    const { stdout, stderr } = await promisify(execFile)(server, [
      "validate-dynamic-config",
      clusterDynamicConfig,
    ]);
    expect(`${stdout}${stderr}`).not.toMatch(/unknown|unregistered|error|warn/i);
  },
);
