/** Fails when gen/ is not exactly what `buf generate` makes from proto/ (CI runs it). */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { promisify } from "node:util";

async function files(dir: string): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    found.set(relative(dir, path), await readFile(path, "utf8"));
  }
  return found;
}

const out = await mkdtemp(join(tmpdir(), "relay-gen-"));
try {
  await promisify(execFile)("npx", ["buf", "generate", "-o", out]);
  const [fresh, committed] = [await files(join(out, "gen")), await files("gen")];
  const stale = [...new Set([...fresh.keys(), ...committed.keys()])].filter(
    (file) => fresh.get(file) !== committed.get(file),
  );
  if (stale.length > 0) {
    console.error(`gen/ is stale; run \`npm run generate\` and commit:\n  ${stale.join("\n  ")}`);
    process.exitCode = 1;
  } else {
    console.log(`gen/ matches proto/ (${fresh.size} files)`);
  }
} finally {
  await rm(out, { recursive: true, force: true });
}
