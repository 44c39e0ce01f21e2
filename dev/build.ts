/**
 * `npm run build`: the JavaScript production runs with `node` alone, in dist/. TypeScript emits
 * every module a process imports (tsconfig.build.json: `cli/relay.ts` and the files the stack
 * or the SDK load by path; relative `.ts` imports rewritten to `.js`; the types are checked by
 * `npm run typecheck`, not here). Beside them: the workflow bundles (workflows/bundle.ts), so a
 * worker never runs webpack; the migrations; the panel the control plane serves. The build is
 * made beside dist/ and swapped in whole, and skipped when dist/ was built from these sources.
 */
import { execFile } from "node:child_process";
import { chmod, cp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { DefaultLogger, Runtime } from "@temporalio/worker";
import { writeWorkflowBundles } from "../workflows/bundle.ts";
import { buildPanel, panelDist, sourceHash } from "./panel.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
export const distDir = join(root, "dist");
/** The entry every process starts from: `node dist/cli/relay.js <command>`. */
export const relayBin = join(distDir, "cli", "relay.js");
/** Inside the build: the hash of the sources it was built from. */
const stampName = ".sources";
const sources = [
  "cli",
  "core",
  "control",
  "dev",
  "edge",
  "gen",
  "platform",
  "store",
  "workflows",
  "panel/index.html",
  "panel/src",
  "package-lock.json",
  "tsconfig.json",
  "tsconfig.build.json",
];

/** Builds dist/ unless it was built from these very sources; says which it did. */
export async function build(): Promise<"built" | "up to date"> {
  const wanted = await sourceHash(sources);
  const built = await readFile(join(distDir, stampName), "utf8").catch(() => "");
  if (built === wanted) return "up to date";
  const outDir = `${distDir}.${process.pid}`;
  await rm(outDir, { recursive: true, force: true });
  try {
    const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
    await promisify(execFile)(
      process.execPath,
      [tsc, "-p", "tsconfig.build.json", "--outDir", outDir],
      {
        cwd: root,
      },
    );
    await writeWorkflowBundles(join(outDir, "workflows"));
    await cp(join(root, "store", "migrations"), join(outDir, "store", "migrations"), {
      recursive: true,
    });
    await buildPanel();
    await cp(panelDist, join(outDir, "panel", "dist"), { recursive: true });
    // The emitted files are ES modules wherever dist/ is copied to.
    await writeFile(join(outDir, "package.json"), `${JSON.stringify({ type: "module" })}\n`);
    await chmod(join(outDir, relative(distDir, relayBin)), 0o755);
    await writeFile(join(outDir, stampName), wanted);
  } catch (error) {
    await rm(outDir, { recursive: true, force: true });
    throw error;
  }
  await rm(distDir, { recursive: true, force: true });
  await rename(outDir, distDir).catch(() => rm(outDir, { recursive: true, force: true }));
  return "built";
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // The bundler's webpack report would fill the output; its warnings and errors still show.
  Runtime.install({ logger: new DefaultLogger("WARN") });
  const started = Date.now();
  const result = await build();
  console.log(`build: ${result} (${relative(process.cwd(), distDir)}, ${Date.now() - started} ms)`);
}
