/**
 * The folders and what each may import: a layer only ever uses the ones below it. Tests and the
 * bench may import anything. docs/architecture.md draws the same picture.
 */
import { readdir, readFile } from "node:fs/promises";
import { join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { expect, test } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));

/** What each folder owns, and the folders its code may import (besides its own). */
const layers: Record<string, { owns: string; imports: string[] }> = {
  core: {
    owns: "the domain rules: pure functions, injected time, no I/O",
    // The contracts only: the payload codec seals Temporal's payload message.
    imports: ["gen"],
  },
  gen: { owns: "code generated from proto/ (never edited)", imports: [] },
  store: { owns: "every table, its SQL and migrations", imports: ["core"] },
  platform: {
    owns: "Node process plumbing: ops server, telemetry, Temporal client, target connection",
    imports: ["core"],
  },
  edge: {
    owns: "the web-standard fetch handler and its runtime adapters",
    imports: ["core", "gen"],
  },
  control: {
    owns: "the management API: its operations, REST, Connect and the panel's server",
    imports: ["core", "gen", "store", "platform"],
  },
  workflows: {
    owns: "Temporal workflows, their activities and the worker",
    imports: ["core", "store", "platform"],
  },
  panel: { owns: "the browser panel", imports: ["core", "gen"] },
  dev: {
    owns: "the stack on one machine: npm start, the tests' stack, the build",
    imports: ["core", "platform"],
  },
  cli: {
    owns: "the relay command: one entry, a subcommand per process",
    imports: ["core", "store", "edge", "control", "workflows", "dev"],
  },
};

/** The edge's Node entry reaches targets through the same pinned connection as the worker. */
const exceptions: Record<string, string[]> = {
  "edge/main.ts": ["platform"],
  // The build writes the workflow bundles.
  "dev/build.ts": ["workflows"],
};

/**
 * Workflow code runs in Temporal's deterministic sandbox: rules from core/, each other, and only
 * types from beside it (activities, the store).
 */
const WORKFLOW_CODE = [
  "workflows/workflows.ts",
  "workflows/batch.ts",
  "workflows/deliveries.ts",
  "workflows/circuit.ts",
  "workflows/notifications.ts",
  "workflows/signals.ts",
  "workflows/trace-interceptors.ts",
];

const isTest = (path: string) => path.endsWith(".test.ts") || path.startsWith("test/");

async function sources(dir: string): Promise<string[]> {
  const entries = await readdir(join(root, dir), { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && /\.tsx?$/.test(e.name))
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .filter((path) => !isTest(path) && !path.includes("node_modules"));
}

const IMPORT = /(?:^|\n)\s*(import|export)\s+(type\s+)?[^;]*?from\s+"([^"]+)"|import\("([^"]+)"\)/g;

/** Each relative import of `path`: the folder it reaches and whether it is type-only. */
function importsOf(path: string, text: string) {
  return [...text.matchAll(IMPORT)].flatMap((m) => {
    const specifier = m[3] ?? m[4] ?? "";
    if (!specifier.startsWith(".")) return [];
    const target = relative(root, resolve(root, path, "..", specifier));
    return [{ target, folder: target.split("/")[0] ?? "", typeOnly: m[2] !== undefined }];
  });
}

test.each(Object.entries(layers).map(([folder, { owns }]) => [folder, owns]))(
  "%s (%s) imports only the layers below it",
  async (folder) => {
    const layer = layers[folder] ?? { imports: [] };
    const crossings: string[] = [];
    for (const path of await sources(folder)) {
      const allowed = new Set([folder, ...layer.imports, ...(exceptions[path] ?? [])]);
      for (const { target, folder: reached } of importsOf(
        path,
        await readFile(join(root, path), "utf8"),
      )) {
        if (!allowed.has(reached)) crossings.push(`${path} -> ${target}`);
      }
    }
    expect(crossings).toEqual([]);
  },
);

test.each(WORKFLOW_CODE)(
  "workflow code (%s) imports rules from core/, workflow code, and only types beside it",
  async (path) => {
    const text = await readFile(join(root, path), "utf8");
    const outside = importsOf(path, text).filter(
      ({ folder, target, typeOnly }) =>
        folder !== "core" && !WORKFLOW_CODE.includes(target) && !typeOnly,
    );
    expect(outside).toEqual([]);
  },
);

test("the checks see imports (a crossing is caught)", () => {
  expect(
    importsOf("workflows/worker.ts", 'import { x } from "../control/api/credits.ts";'),
  ).toEqual([{ target: "control/api/credits.ts", folder: "control", typeOnly: false }]);
  expect(importsOf("workflows/workflows.ts", 'import type { A } from "./activities.ts";')).toEqual([
    { target: "workflows/activities.ts", folder: "workflows", typeOnly: true },
  ]);
});
