/**
 * What a probe family is, and the malformations the edge and the control plane both get (each
 * with its own request line and headers): lying lengths, huge and duplicate headers, slow
 * bodies and raw garbage. bench/fuzz-edge-probes.ts and bench/fuzz-control-probes.ts use them.
 */
import type { Random } from "./fuzz-values.ts";
import { CLOSE, type Component, type Header, http1, JSON_TYPE, type Probe } from "./fuzz-wire.ts";

export interface FuzzTarget {
  edgePort: number;
  controlPort: number;
  /** A project with line v1: `hook` (async to a real target) and `strict` (a JSON Schema). */
  project: { slug: string; ownerToken: string; key: string };
  adminToken: string;
}

export type Family = (r: Random, t: FuzzTarget) => Probe;

/** Content-Length that says more, or less, than the body, or is no number. */
export function lyingLength(
  component: Component,
  r: Random,
  t: FuzzTarget,
  requestLine: string,
  headers: Header[],
): Probe {
  const body = Buffer.from(JSON.stringify({ n: r.int(1000) }));
  const auth: Header[] =
    component === "edge"
      ? [["Authorization", `Bearer ${t.project.key}`]]
      : [["Authorization", `Bearer ${t.project.ownerToken}`]];
  const variants: [number | string, boolean][] = [
    [body.length + 1 + r.int(1000), true],
    [Math.max(0, body.length - 1 - r.int(body.length)), false],
    ["abc", false],
    ["-1", false],
    ["1e3", false],
    [`${body.length}, ${body.length + 5}`, false],
    ["99999999999999999999", true],
    [" 7", false],
  ];
  const [length, endAfter] = r.pick(variants);
  return {
    component,
    kind: `${component} lying length`,
    parts: [http1(requestLine, [...headers, ...auth, JSON_TYPE, CLOSE], body, length)],
    endAfter,
  };
}

export function hugeHeaders(
  component: Component,
  r: Random,
  requestLine: string,
  headers: Header[],
): Probe {
  const variants: (() => Header[])[] = [
    () => [["X-Big", "v".repeat(20_000 + r.int(50_000))]],
    () => Array.from({ length: 2000 }, (_, i): Header => [`X-H${i}`, "v"]),
    () => [["Cookie", `${"c=".repeat(8000)}`]],
    () => [["X-Almost", "v".repeat(15_000)]],
    () => [[`X-${"n".repeat(10_000)}`, "v"]],
    () => [["Authorization", `Bearer ${"t".repeat(12_000)}`]],
  ];
  return {
    component,
    kind: `${component} huge headers`,
    parts: [http1(requestLine, [...headers, ...r.pick(variants)(), CLOSE], Buffer.from("{}"))],
  };
}

export function duplicateHeaders(
  component: Component,
  r: Random,
  requestLine: string,
  headers: Header[],
): Probe {
  const variants: (() => [Header[], number | string | null])[] = [
    () => [[...headers, ...headers], 2],
    () => [
      [
        ["Authorization", `Bearer ${r.text(10)}`],
        ["Authorization", `Bearer ${r.text(10)}`],
      ],
      2,
    ],
    () => [[["Content-Length", "5"]], 2],
    () => [[["Transfer-Encoding", "chunked"]], 2],
    () => [[["Transfer-Encoding", "chunked, identity"]], null],
    () => [
      [
        ["Content-Type", "application/json"],
        ["Content-Type", "text/plain"],
      ],
      2,
    ],
    () => [[["Host", `${r.text(8)}.localhost`]], 2],
    () => [
      [
        ["Idempotency-Key", r.text(8)],
        ["Idempotency-Key", r.text(8)],
      ],
      2,
    ],
    () => [
      [
        ["X-Forwarded-For", "1.2.3.4"],
        ["X-Forwarded-For", "not an ip, [::1], 999.1.1.1"],
      ],
      2,
    ],
  ];
  const [extra, length] = r.pick(variants)();
  return {
    component,
    kind: `${component} duplicate headers`,
    parts: [http1(requestLine, [...headers, ...extra, CLOSE], Buffer.from("{}"), length)],
  };
}

/** A body that trickles in, then stops short: bounded to about two seconds. */
export function slowBody(
  component: Component,
  r: Random,
  requestLine: string,
  headers: Header[],
): Probe {
  const head = http1(requestLine, [...headers, JSON_TYPE, CLOSE], Buffer.alloc(0), 1000);
  const parts: (Buffer | number)[] = [head];
  for (let i = 0; i < 8; i++) parts.push(250, Buffer.from(r.text(10)));
  return { component, kind: `${component} slow body`, parts, timeoutMs: 8000 };
}

/** Not HTTP at all, or HTTP/2 that goes wrong after its preface. */
export function rawGarbage(component: Component, r: Random): Probe {
  const variants: (() => Buffer)[] = [
    () => r.bytes(r.int(2000) + 1),
    () => Buffer.from("GET / HTTP/1.1\r\n\r\n\u0000\u0000"),
    () => Buffer.from("GET / HTTP/9.9\r\nHost: x\r\n\r\n"),
    () => Buffer.from("GET /\u0000 HTTP/1.1\r\nHost: x\r\n\r\n"),
    () => Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").subarray(0, r.int(24) + 1),
    () => Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), r.bytes(200)]),
    () => Buffer.from("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
    () => Buffer.from("GET / HTTP/1.1\nHost: x\n\n"),
    () => Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n folded: header\r\n\r\n"),
  ];
  return {
    component,
    kind: `${component} raw garbage`,
    parts: [r.pick(variants)()],
    endAfter: true,
  };
}
