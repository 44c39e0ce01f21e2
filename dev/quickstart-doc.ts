/**
 * docs/quickstart.md shows each example under examples/ whole, under a link to the file; this
 * says where it does not. `npm test` runs it (dev/quickstart-doc.test.ts) so the doc and the
 * examples cannot drift apart; `npm run check:quickstart` also runs the examples themselves.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
export const DOC = "docs/quickstart.md";
/** The example files the doc shows whole, each under a link to itself. */
export const EXAMPLES = [
  "examples/node/caller.ts",
  "examples/node/receiver.ts",
  "examples/python/caller.py",
  "examples/python/receiver.py",
  "examples/go/caller/main.go",
  "examples/go/receiver/main.go",
];

/** Where the doc does not show an example file as it is. */
export async function docProblems(): Promise<string[]> {
  const doc = await readFile(join(ROOT, DOC), "utf8");
  const problems: string[] = [];
  for (const file of EXAMPLES) {
    const heading = `[\`${file}\`](../${file})`;
    const at = doc.indexOf(`${heading}\n`);
    // The fenced block right under the link, whole.
    const block = /\n*```[^\n]*\n([\s\S]*?\n)```(?:\n|$)/y;
    block.lastIndex = at + heading.length + 1;
    const shown = at < 0 ? null : block.exec(doc);
    if (!shown) {
      problems.push(`${DOC} has no code block under ${heading}`);
    } else if (shown[1] !== (await readFile(join(ROOT, file), "utf8"))) {
      problems.push(`${DOC} shows ${file} otherwise than the file is`);
    }
  }
  return problems;
}
