/**
 * Builds the browser panel (panel/) into panel/dist with Vite, which the control plane serves at
 * `/`. `npm start` and the tests call it before starting the stack; it rebuilds only when the
 * panel's sources, the generated clients or the locked dependencies changed since the last build.
 */
import { createHash } from "node:crypto";
import { readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { runsFromBuild } from "../platform/modules.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
export const panelRoot = join(root, "panel");
export const panelDist = join(panelRoot, "dist");
/** Inside the build: the hash of the sources it was built from. */
const stampName = ".sources";

/** Everything the bundle is made from. */
const sources = ["panel/index.html", "panel/src", "gen/relay", "package-lock.json", "dev/panel.ts"];

/** One hash of every file under `paths` (relative to the repository), names and contents. */
export async function sourceHash(paths: string[]): Promise<string> {
  const hash = createHash("sha256");
  const files: string[] = [];
  for (const source of paths) {
    const path = join(root, source);
    const entries = await readdir(path, { recursive: true, withFileTypes: true }).catch(() => null);
    if (!entries) files.push(path);
    else for (const e of entries) if (e.isFile()) files.push(join(e.parentPath, e.name));
  }
  for (const file of files.sort()) {
    hash
      .update(relative(root, file))
      .update("\0")
      .update(await readFile(file))
      .update("\0");
  }
  return hash.digest("hex");
}

/** Builds panel/dist unless it was built from these very sources; says which it did. */
export async function buildPanel(): Promise<"built" | "up to date"> {
  // The build (dist/) carries the panel `npm run build` made, and no sources to make it from.
  if (runsFromBuild(import.meta.url)) return "up to date";
  const wanted = await sourceHash(sources);
  const built = await readFile(join(panelDist, stampName), "utf8").catch(() => "");
  if (built === wanted) return "up to date";
  // Imported here: a stack whose panel is current never loads Vite.
  const [{ build }, { default: react }] = await Promise.all([
    import("vite"),
    import("@vitejs/plugin-react"),
  ]);
  // Built beside and swapped in whole, so two stacks starting at once (a test run beside
  // `npm start`) never serve or stamp each other's half-written files.
  const outDir = `${panelDist}.${process.pid}`;
  await build({
    configFile: false,
    root: panelRoot,
    logLevel: "warn",
    plugins: [react()],
    build: { outDir, emptyOutDir: true, chunkSizeWarningLimit: 1024 },
  });
  await writeFile(join(outDir, stampName), wanted);
  await rm(panelDist, { recursive: true, force: true });
  await rename(outDir, panelDist).catch(() => rm(outDir, { recursive: true, force: true }));
  return "built";
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  console.log(`panel: ${await buildPanel()} (${relative(process.cwd(), panelDist)})`);
}
