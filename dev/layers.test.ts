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
  "workflows/batch-holds.ts",
  "workflows/callbacks.ts",
  "workflows/delays.ts",
  "workflows/deliveries.ts",
  "workflows/circuit.ts",
  "workflows/lanes.ts",
  "workflows/lanes-before.ts",
  "workflows/notifications.ts",
  "workflows/recoveries.ts",
  "workflows/schedules.ts",
  "workflows/signals.ts",
  "workflows/status.ts",
  "workflows/sync.ts",
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

/** Folders nobody writes by hand: generated code, installed packages, builds, the stack's data. */
const NOT_HAND_WRITTEN =
  /^(gen|dist|dist\..*|\.relay|\.git|bench\/results|panel\/dist|panel\/dist\..*)$|(^|\/)node_modules$/;

/** Every hand-written TypeScript file, tests included, as paths from the root. */
async function handWritten(dir = ""): Promise<string[]> {
  const files: string[] = [];
  for (const entry of await readdir(join(root, dir), { withFileTypes: true })) {
    const path = dir === "" ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory() && !NOT_HAND_WRITTEN.test(path))
      files.push(...(await handWritten(path)));
    if (entry.isFile() && /\.(ts|tsx|mts)$/.test(entry.name)) files.push(path);
  }
  return files;
}

/**
 * The circles in an import graph (Tarjan's strongly connected components): each group of files
 * that reach one another, sorted, and a file that imports itself.
 */
function circles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string) => {
    index.set(file, index.size);
    low.set(file, index.get(file) ?? 0);
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file) ?? 0, low.get(next) ?? 0));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file) ?? 0, index.get(next) ?? 0));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const group: string[] = [];
    let member: string | undefined;
    do {
      member = stack.pop();
      if (member === undefined) break;
      onStack.delete(member);
      group.push(member);
    } while (member !== file);
    if (group.length > 1 || graph.get(file)?.includes(file)) found.push(group.sort());
  };
  for (const file of [...graph.keys()].sort()) if (!index.has(file)) visit(file);
  return found;
}

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

test("no import circle between hand-written files (type-only imports count)", async () => {
  const files = await handWritten();
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const path of files) {
    const text = await readFile(join(root, path), "utf8");
    graph.set(
      path,
      importsOf(path, text)
        .map(({ target }) => target)
        .filter((target) => known.has(target)),
    );
  }
  expect(circles(graph).map((group) => group.join(" <-> "))).toEqual([]);
});

const MAX_LINES = 400;

test(`no hand-written file is over ${MAX_LINES} lines`, async () => {
  const long: string[] = [];
  for (const path of await handWritten()) {
    const text = await readFile(join(root, path), "utf8");
    const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
    if (lines > MAX_LINES) long.push(`${path} (${lines})`);
  }
  expect(long).toEqual([]);
});

test("the circle check sees a circle, and a file importing itself", () => {
  const graph = new Map([
    ["a.ts", ["b.ts"]],
    ["b.ts", ["c.ts"]],
    ["c.ts", ["a.ts", "d.ts"]],
    ["d.ts", ["d.ts"]],
    ["e.ts", ["a.ts"]],
  ]);
  expect(circles(graph)).toEqual([["d.ts"], ["a.ts", "b.ts", "c.ts"]]);
});

test("the checks see imports (a crossing is caught)", () => {
  expect(
    importsOf("workflows/worker.ts", 'import { x } from "../control/api/credits.ts";'),
  ).toEqual([{ target: "control/api/credits.ts", folder: "control", typeOnly: false }]);
  expect(importsOf("workflows/workflows.ts", 'import type { A } from "./activities.ts";')).toEqual([
    { target: "workflows/activities.ts", folder: "workflows", typeOnly: true },
  ]);
});
