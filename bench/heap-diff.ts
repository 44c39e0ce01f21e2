/**
 * What a V8 heap snapshot (.heapsnapshot, as Node's --heapsnapshot-signal writes it) holds, by
 * constructor or type name, and what grew between two of them: the Summary and Comparison views
 * of Chrome's DevTools, from the command line. A snapshot can be hundreds of megabytes, more than
 * one string may hold, so it is read line by line: V8 writes one node, one edge and one string
 * per line, and only the node table and the strings naming nodes are kept.
 *
 * Alone: `tsx bench/heap-diff.ts start.heapsnapshot end.heapsnapshot` prints the top growers.
 */
import { createReadStream } from "node:fs";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

export interface Group {
  count: number;
  bytes: number;
}

export interface HeapSummary {
  /** Self sizes of every node: the live heap after the GC the snapshot does first. */
  totalBytes: number;
  nodeCount: number;
  /** By constructor (objects), function (closures) or type in parentheses, as DevTools groups. */
  groups: Map<string, Group>;
  /** Strings by shape (`stringShape`): which of them grew says whose they are. */
  strings: Map<string, Group>;
}

export interface Growth {
  name: string;
  countDelta: number;
  bytesDelta: number;
  start: Group;
  end: Group;
}

interface SnapshotMeta {
  node_fields: string[];
  node_types: [string[], ...unknown[]];
}

const STRING_TYPES = new Set(["string", "concatenated string", "sliced string"]);
/** Node types whose name is kept: constructors, functions, V8's internal kinds, string values. */
const NAMED = new Set(["object", "native", "closure", "array", "hidden", ...STRING_TYPES]);
/** Longest group name kept: a name is code's, but bounded all the same. */
const MAX_NAME = 100;

function groupName(type: string, name: string | undefined): string | null {
  switch (type) {
    case "object":
    case "native":
      return (name ?? "?").slice(0, MAX_NAME);
    case "closure":
      return `(closure) ${name || "anonymous"}`.slice(0, MAX_NAME);
    case "array":
      // Unnamed: a backing store, such as a Map's or a Set's table.
      return name ? `(array) ${name}`.slice(0, MAX_NAME) : "(array)";
    case "hidden":
      return `(system) ${name ?? ""}`.slice(0, MAX_NAME);
    case "string":
    case "concatenated string":
    case "sliced string":
      return "(string)";
    case "code":
      return "(compiled code)";
    case "number":
      return "(heap number)";
    case "synthetic":
      // Roots and groupings of V8's own, no memory of their own.
      return null;
    default:
      return `(${type})`;
  }
}

/**
 * A string's value with what varies between its kind blurred: runs of digits become `#`, long
 * identifiers and hashes `*`, and only the start is kept (`k:nope-#:*`, `req_*`).
 */
export function stringShape(value: string): string {
  return value
    .slice(0, 60)
    .replace(/[A-Za-z0-9_-]{16,}/g, "*")
    .replace(/\d+/g, "#")
    .slice(0, 40);
}

export async function summarizeHeapSnapshot(path: string): Promise<HeapSummary> {
  const lines = createInterface({
    input: createReadStream(path, { encoding: "utf8" }),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  let section: "header" | "nodes" | "between" | "strings" = "header";
  let header = "";
  let meta: SnapshotMeta | undefined;
  let nodes = new Uint32Array(0);
  let filled = 0;
  let stride = 0;
  let typeField = 0;
  let nameField = 0;
  let sizeField = 0;
  /** The strings naming grouped nodes, by index; every other string is skipped unparsed. */
  const names = new Map<number, string | undefined>();
  let stringIndex = 0;

  for await (const line of lines) {
    if (section === "header") {
      if (!line.startsWith('"nodes":[')) {
        header += line;
        continue;
      }
      const parsed = JSON.parse(`${header.replace(/,\s*$/, "")}}`) as {
        snapshot: { meta: SnapshotMeta; node_count: number };
      };
      meta = parsed.snapshot.meta;
      stride = meta.node_fields.length;
      typeField = meta.node_fields.indexOf("type");
      nameField = meta.node_fields.indexOf("name");
      sizeField = meta.node_fields.indexOf("self_size");
      nodes = new Uint32Array(parsed.snapshot.node_count * stride);
      section = "nodes";
    }
    if (section === "nodes") {
      const end = line.indexOf("]");
      const numbers = line.slice(line.startsWith('"nodes":[') ? 9 : 0, end < 0 ? undefined : end);
      for (const number of numbers.split(",")) if (number !== "") nodes[filled++] = Number(number);
      if (end < 0) continue;
      if (filled !== nodes.length) {
        throw new Error(
          `${path}: ${filled / stride} nodes read, the header says ${nodes.length / stride}`,
        );
      }
      const types = meta?.node_types[0] ?? [];
      for (let i = 0; i < nodes.length; i += stride) {
        if (NAMED.has(types[nodes[i + typeField] as number] ?? "")) {
          names.set(nodes[i + nameField] as number, undefined);
        }
      }
      section = "between";
      continue;
    }
    if (section === "between") {
      // Edges, samples and locations hold numbers only: the first "strings" is the key.
      if (!line.startsWith('"strings":[')) continue;
      section = "strings";
    }
    const literal = line.slice(line.startsWith('"strings":[') ? 11 : 0).replace(/(,|\]\})$/, "");
    if (names.has(stringIndex)) names.set(stringIndex, JSON.parse(literal) as string);
    stringIndex++;
  }
  if (!meta) throw new Error(`${path}: not a heap snapshot (no node table)`);

  const types = meta.node_types[0];
  const groups = new Map<string, Group>();
  const strings = new Map<string, Group>();
  const add = (to: Map<string, Group>, name: string, bytes: number) => {
    const group = to.get(name) ?? { count: 0, bytes: 0 };
    group.count++;
    group.bytes += bytes;
    to.set(name, group);
  };
  let totalBytes = 0;
  for (let i = 0; i < nodes.length; i += stride) {
    const type = types[nodes[i + typeField] as number] ?? "?";
    const bytes = nodes[i + sizeField] as number;
    totalBytes += bytes;
    const value = names.get(nodes[i + nameField] as number);
    const name = groupName(type, value);
    if (name !== null) add(groups, name, bytes);
    if (STRING_TYPES.has(type)) add(strings, stringShape(value ?? ""), bytes);
  }
  return { totalBytes, nodeCount: nodes.length / stride, groups, strings };
}

/** Every group (or string shape) that changed, most bytes grown first. */
export function heapGrowth(
  start: HeapSummary,
  end: HeapSummary,
  by: "groups" | "strings" = "groups",
): Growth[] {
  const none: Group = { count: 0, bytes: 0 };
  const names = new Set([...start[by].keys(), ...end[by].keys()]);
  return [...names]
    .map((name) => {
      const a = start[by].get(name) ?? none;
      const b = end[by].get(name) ?? none;
      return {
        name,
        countDelta: b.count - a.count,
        bytesDelta: b.bytes - a.bytes,
        start: a,
        end: b,
      };
    })
    .filter((g) => g.countDelta !== 0 || g.bytesDelta !== 0)
    .sort((x, y) => y.bytesDelta - x.bytesDelta);
}

const signed = (n: number) => (n > 0 ? `+${n}` : String(n));
const kib = (bytes: number) => `${signed(Math.round(bytes / 102.4) / 10)} KiB`;

/** A markdown table of the `top` growers and the totals. */
export function growthTable(
  start: HeapSummary,
  end: HeapSummary,
  top = 15,
  by: "groups" | "strings" = "groups",
): string {
  const rows = heapGrowth(start, end, by).slice(0, top);
  const total = (summary: HeapSummary) =>
    [...summary[by].values()].reduce(
      (sum, g) => ({ count: sum.count + g.count, bytes: sum.bytes + g.bytes }),
      { count: 0, bytes: 0 },
    );
  const [a, b] = [total(start), total(end)];
  return [
    `| ${by === "groups" ? "constructor / type" : "string shape"} | count start | count end | count delta | bytes delta |`,
    "|---|---|---|---|---|",
    ...rows.map(
      (g) =>
        `| ${JSON.stringify(g.name).slice(1, -1).replaceAll("|", "\\|")} | ${g.start.count} | ${g.end.count} | ${signed(g.countDelta)} | ${kib(g.bytesDelta)} |`,
    ),
    `| **total** | ${a.count} | ${b.count} | ${signed(b.count - a.count)} | ${kib(b.bytes - a.bytes)} |`,
  ].join("\n");
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const [startPath, endPath] = process.argv.slice(2);
  if (!startPath || !endPath) {
    console.error("usage: tsx bench/heap-diff.ts start.heapsnapshot end.heapsnapshot");
    process.exit(2);
  }
  const [start, end] = await Promise.all([
    summarizeHeapSnapshot(startPath),
    summarizeHeapSnapshot(endPath),
  ]);
  console.log(growthTable(start, end));
  console.log(`\n${growthTable(start, end, 10, "strings")}`);
}
