/**
 * The docs stay readable and whole: the README stays short, every relative link in the README
 * and docs/ reaches a file (and a heading, when it names one), and every `*.md` file a comment in
 * the code cites is in the repository. Reads files only; needs no stack.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, test } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));
const README_MAX_LINES = 220;
const docs = [
  join(root, "README.md"),
  ...readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => join(root, "docs", name)),
];
const sourceFolders = [
  "bench",
  "control",
  "core",
  "dev",
  "edge",
  "panel/src",
  "platform",
  "store",
  "test",
  "workflows",
];

/** Markdown without its code: a link inside a code block or span is an example, not a link. */
function prose(markdown: string): string {
  return markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, "").replace(/`[^`\n]*`/g, "");
}

/** The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to dashes. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const found = new Set<string>();
  for (const [, heading = ""] of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = heading
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, "")
      .replace(/\s/g, "-");
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    found.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return found;
}

/** Each relative link's problem: a file or heading it names that does not exist. */
function brokenLinks(file: string): string[] {
  const broken: string[] = [];
  for (const [, target = ""] of prose(readFileSync(file, "utf8")).matchAll(
    /!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g,
  )) {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto: and the like
    const [path = "", anchor] = target.split("#");
    const linked = path ? resolve(dirname(file), decodeURIComponent(path)) : file;
    if (!existsSync(linked)) {
      broken.push(`${target}: no such file`);
    } else if (anchor && linked.endsWith(".md")) {
      if (!anchors(readFileSync(linked, "utf8")).has(anchor)) {
        broken.push(`${target}: no such heading`);
      }
    }
  }
  return broken;
}

function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === "node_modules" ? [] : sourceFiles(path);
    return /\.(ts|tsx|proto|sql)$/.test(entry.name) ? [path] : [];
  });
}

describe("the docs", () => {
  test(`the README is at most ${README_MAX_LINES} lines`, () => {
    const lines = readFileSync(join(root, "README.md"), "utf8").trimEnd().split("\n").length;
    expect(lines).toBeLessThanOrEqual(README_MAX_LINES);
  });

  test("every relative link in README.md and docs/*.md reaches its file and heading", () => {
    const broken = docs.flatMap((file) =>
      brokenLinks(file).map((problem) => `${relative(root, file)}: ${problem}`),
    );
    expect(broken).toEqual([]);
  });

  test("every .md file a source comment cites is in the repository", () => {
    const missing: string[] = [];
    for (const file of sourceFolders.flatMap((folder) => sourceFiles(join(root, folder)))) {
      for (const [cited = ""] of readFileSync(file, "utf8").matchAll(/[\w./-]*\w\.md\b/g)) {
        const found = [root, dirname(file)].some((base) => existsSync(resolve(base, cited)));
        if (!found) missing.push(`${relative(root, file)}: ${cited}`);
      }
    }
    expect(missing).toEqual([]);
  });
});
