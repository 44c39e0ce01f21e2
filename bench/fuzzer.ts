/**
 * Malformed calls to a running stack, for `npm run fuzz` and test/fuzz.test.ts: inbound calls
 * to the edge and management calls to the control plane (bad JSON, lying lengths, huge and
 * duplicate headers, odd paths and hosts, random keys, compressed bombs, slow bodies), each
 * written on a raw socket so nothing between here and the server fixes it first. Every answer
 * is counted by component and status class; a 500 keeps the exact request for the report.
 */
import { connect } from "node:net";
import { gzipSync } from "node:zlib";

export interface FuzzTarget {
  edgePort: number;
  controlPort: number;
  /** A project with line v1: `hook` (async to a real target) and `strict` (a JSON Schema). */
  project: { slug: string; ownerToken: string; key: string };
  adminToken: string;
}

export type Component = "edge" | "control";
/** A status code, or what happened instead of an answer. */
export type Answer = number | "closed" | "reset" | "refused" | "timeout";

interface Probe {
  component: Component;
  /** The family of malformation, for the counts. */
  kind: string;
  /** Written in order; a number is a pause of that many milliseconds (a slow body). */
  parts: (Buffer | number)[];
  /** Half-close once written: a body that ends before its Content-Length. */
  endAfter?: boolean;
  /** How long to wait for the status line. */
  timeoutMs?: number;
}

export interface FuzzFinding {
  component: Component;
  kind: string;
  status: number;
  /** The request as written (head, and the start of its body), JSON-escaped by the report. */
  request: string;
}

export interface FuzzReport {
  sent: number;
  /** component -> status class ("2xx".."5xx", "closed", "reset", "refused", "timeout") -> count. */
  byClass: Record<Component, Record<string, number>>;
  /** kind -> status class -> count. */
  byKind: Record<string, Record<string, number>>;
  /** Answers of 5xx by component and status ("edge 503"). */
  serverErrors: Record<string, number>;
  /** Every answer of 500, with its request (the first 50 in full). */
  internalErrors: FuzzFinding[];
  internalErrorCount: number;
  seconds: number;
}

/** A seeded generator, so a run can be repeated exactly (FUZZ_SEED). */
export function random(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
  const text = (length: number, alphabet = "abcdefghijklmnopqrstuvwxyz0123456789") =>
    Array.from({ length }, () => alphabet[int(alphabet.length)]).join("");
  const bytes = (length: number) => Buffer.from(Array.from({ length }, () => int(256)));
  return { next, int, pick, text, bytes };
}
type Random = ReturnType<typeof random>;

type Header = [string, string | Buffer];

/** An HTTP/1.1 request, exactly as given: no header is added unless asked. */
export function http1(
  requestLine: string | Buffer,
  headers: Header[],
  body: Buffer = Buffer.alloc(0),
  contentLength: number | string | null = body.length,
): Buffer {
  const lines: Buffer[] = [Buffer.isBuffer(requestLine) ? requestLine : Buffer.from(requestLine)];
  if (contentLength !== null) lines.push(Buffer.from(`Content-Length: ${contentLength}`));
  for (const [name, value] of headers) {
    lines.push(Buffer.concat([Buffer.from(`${name}: `), Buffer.from(value)]));
  }
  const head = Buffer.concat(lines.flatMap((line) => [line, Buffer.from("\r\n")]));
  return Buffer.concat([head, Buffer.from("\r\n"), body]);
}

const JSON_TYPE: Header = ["Content-Type", "application/json"];
const CLOSE: Header = ["Connection", "close"];

/** Bodies that are not the JSON they claim to be, or JSON of the wrong shape. */
function badJson(r: Random): Buffer {
  const variants = [
    () => Buffer.from(`{"a":${"[".repeat(r.int(5000) + 1)}`),
    () => Buffer.from(`{"a": 1,}`),
    () => Buffer.from(`{"a":"${r.text(20)}`),
    () => r.bytes(r.int(512) + 1),
    () => Buffer.from([0xef, 0xbb, 0xbf, ...Buffer.from('{"a":1}')]),
    () => Buffer.from(`{"a":"\\ud800"}`),
    () => Buffer.from(`{"__proto__":{"polluted":true},"constructor":{"prototype":{"x":1}}}`),
    () => Buffer.from(`{"name":1e309,"slug":["${r.text(3)}"],"key":null}`),
    () => Buffer.from("null"),
    () => Buffer.from(`"${"x".repeat(r.int(100_000))}"`),
    () => Buffer.from(JSON.stringify(Array.from({ length: r.int(10_000) }, () => ({})))),
    () => Buffer.from(`{"a":1}${"\u0000".repeat(r.int(10) + 1)}`),
    () => Buffer.from([0xe0, 0x80, 0x22, 0x7b]),
  ];
  return r.pick(variants)();
}

/** A gzip bomb: `megabytes` of zeros in about a thousandth of the bytes. */
const bombs = new Map<number, Buffer>();
function gzipBomb(megabytes: number): Buffer {
  let bomb = bombs.get(megabytes);
  if (!bomb) {
    bomb = gzipSync(Buffer.alloc(megabytes * 1024 * 1024), { level: 9 });
    bombs.set(megabytes, bomb);
  }
  return bomb;
}

/** Request targets no client library would send. */
function oddTarget(r: Random, valid: string): string | Buffer {
  const variants: (() => string | Buffer)[] = [
    () => `http://evil.example${valid}`,
    () => `http://127.0.0.1:99999${valid}`,
    () => "*",
    () => `${valid}%00`,
    () => `${valid}/%E0%A4%A`,
    () => `/%E0${valid}`,
    () => `${valid}?x=%zz&y=%E0&z=%00`,
    () => `/${"a".repeat(r.int(8000) + 1000)}`,
    () => `//${valid}/../../etc/passwd`,
    () => `${valid}/${"%2e%2e/".repeat(20)}`,
    () => `/${r.text(12, "%/.\\;?#@:~!$&'()*+,=")}`,
    () => Buffer.concat([Buffer.from(`${valid}/`), r.bytes(8)]),
    () => "",
    () => "/../",
    () => `${valid}#frag`,
    () => "h",
  ];
  return r.pick(variants)();
}

/** Host headers that are not a host: ports out of range, escapes, literals, giant labels. */
function oddHost(r: Random, slug: string, port: number): string | Buffer {
  const variants: (() => string | Buffer)[] = [
    () => `${slug}.localhost:99999`,
    () => `${slug}.localhost:-1`,
    () => `${slug}.localhost:${port}:${port}`,
    () => "%00.localhost",
    () => `${slug}%00.localhost`,
    () => "[::1]",
    () => `[::1]:${port}`,
    () => "[::1",
    () => `${"a".repeat(16_000)}.localhost`,
    () => `${r.text(63)}.${r.text(63)}.localhost`,
    () => "",
    () => " ",
    () => `${slug}.localhost/evil`,
    () => `${slug}.localhost@evil.example`,
    () => `user:pass@${slug}.localhost`,
    () => `${slug}..localhost`,
    () => `.${slug}.localhost.`,
    () => `xn--${r.text(10)}.localhost`,
    () => Buffer.from(`${slug}.l\u00f6calhost`, "latin1"),
    () => Buffer.from([0xe0, 0x2e, 0x6c, 0x6f]),
    () => `${slug}.localhost:0`,
    () => "127.0.0.1",
    () => "0x7f.1",
  ];
  return r.pick(variants)();
}

/** Authorization values: random keys (well-formed and not), huge ones, other schemes. */
function randomAuth(r: Random, valid: string): string | Buffer {
  const variants: (() => string | Buffer)[] = [
    () => `Bearer rk_live_${r.text(32)}`,
    () => `Bearer rk_test_${r.text(r.int(80))}`,
    () => `Bearer ${r.text(r.int(200))}`,
    () => `Bearer ${"k".repeat(8000)}`,
    () => "Bearer",
    () => "Bearer ",
    () => `Basic ${Buffer.from(`${r.text(5)}:${r.text(5)}`).toString("base64")}`,
    () => `bearer ${valid}`,
    () => `Bearer ${valid}${r.text(1)}`,
    () => `Bearer ${valid.slice(0, -1)}`,
    () => Buffer.concat([Buffer.from("Bearer rk_live_"), r.bytes(24)]),
    () => `Bearer rmt_${r.text(40)}`,
  ];
  return r.pick(variants)();
}

type Family = (r: Random, t: FuzzTarget) => Probe;

const edgeFamilies: Record<string, Family> = {
  "edge bad json": (r, t) => ({
    component: "edge",
    kind: "edge bad json",
    parts: [
      http1(
        `POST /v1/${r.pick(["strict", "hook"])} HTTP/1.1`,
        [
          ["Host", `${t.project.slug}.localhost:${t.edgePort}`],
          ["Authorization", `Bearer ${t.project.key}`],
          JSON_TYPE,
          CLOSE,
        ],
        badJson(r),
      ),
    ],
  }),
  "edge random key": (r, t) => ({
    component: "edge",
    kind: "edge random key",
    parts: [
      http1(
        "POST /v1/hook HTTP/1.1",
        [
          [
            "Host",
            r.next() < 0.5
              ? `${t.project.slug}.localhost:${t.edgePort}`
              : `${r.text(r.int(40) + 1)}.localhost`,
          ],
          ["Authorization", randomAuth(r, t.project.key)],
          JSON_TYPE,
          CLOSE,
        ],
        Buffer.from("{}"),
      ),
    ],
  }),
  "edge lying length": (r, t) => lyingLength("edge", r, t, "POST /v1/hook HTTP/1.1", edgeHost(t)),
  "edge huge headers": (r, t) => hugeHeaders("edge", r, "POST /v1/hook HTTP/1.1", edgeHost(t)),
  "edge duplicate headers": (r, t) =>
    duplicateHeaders("edge", r, "POST /v1/hook HTTP/1.1", edgeHost(t)),
  "edge odd path": (r, t) => ({
    component: "edge",
    kind: "edge odd path",
    parts: [
      http1(
        Buffer.concat([
          Buffer.from(`${r.pick(["POST", "GET", "OPTIONS", "DELETE"])} `),
          Buffer.from(oddTarget(r, "/v1/hook")),
          Buffer.from(" HTTP/1.1"),
        ]),
        [...edgeHost(t), ["Authorization", `Bearer ${t.project.key}`], CLOSE],
        Buffer.from("{}"),
      ),
    ],
  }),
  "edge odd host": (r, t) => ({
    component: "edge",
    kind: "edge odd host",
    parts: [
      http1(
        "POST /v1/hook HTTP/1.1",
        [
          ["Host", oddHost(r, t.project.slug, t.edgePort)],
          ["Authorization", `Bearer ${t.project.key}`],
          CLOSE,
        ],
        Buffer.from("{}"),
      ),
    ],
  }),
  "edge odd method": (r, t) => ({
    component: "edge",
    kind: "edge odd method",
    parts: [
      http1(
        `${r.pick(["FOO", "PROPFIND", "TRACE", "CONNECT", "patch", "M-SEARCH", "PRI"])} /v1/hook HTTP/1.1`,
        [...edgeHost(t), ["Authorization", `Bearer ${t.project.key}`], CLOSE],
        Buffer.from("{}"),
      ),
    ],
  }),
  "edge compressed body": (r, t) => ({
    component: "edge",
    kind: "edge compressed body",
    parts: [
      http1(
        "POST /v1/strict HTTP/1.1",
        [
          ...edgeHost(t),
          ["Authorization", `Bearer ${t.project.key}`],
          JSON_TYPE,
          ["Content-Encoding", r.pick(["gzip", "br", "deflate", "gzip, gzip", "x-unknown"])],
          CLOSE,
        ],
        r.next() < 0.5 ? gzipBomb(1) : r.bytes(64),
      ),
    ],
  }),
  "edge slow body": (r, t) => slowBody("edge", r, "POST /v1/hook HTTP/1.1", edgeHost(t)),
  "edge raw garbage": (r) => rawGarbage("edge", r),
};

const edgeHost = (t: FuzzTarget): Header[] => [
  ["Host", `${t.project.slug}.localhost:${t.edgePort}`],
];

/** Content-Length that says more, or less, than the body, or is no number. */
function lyingLength(
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

function hugeHeaders(
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

function duplicateHeaders(
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
function slowBody(component: Component, r: Random, requestLine: string, headers: Header[]): Probe {
  const head = http1(requestLine, [...headers, JSON_TYPE, CLOSE], Buffer.alloc(0), 1000);
  const parts: (Buffer | number)[] = [head];
  for (let i = 0; i < 8; i++) parts.push(250, Buffer.from(r.text(10)));
  return { component, kind: `${component} slow body`, parts, timeoutMs: 8000 };
}

/** Not HTTP at all, or HTTP/2 that goes wrong after its preface. */
function rawGarbage(component: Component, r: Random): Probe {
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

/** Connect and REST paths the control plane routes, for its families. */
function controlPath(r: Random, t: FuzzTarget): string {
  const base = `/projects/${t.project.slug}`;
  return r.pick([
    "/projects",
    base,
    `${base}/lines`,
    `${base}/lines/v1/endpoints`,
    `${base}/lines/v1/endpoints/hook`,
    `${base}/keys`,
    `${base}/requests`,
    `${base}/requests/req_${r.text(10)}`,
    `${base}/failures`,
    `${base}/usage`,
    `${base}/policy`,
    `${base}/members`,
    "/relay.v1.ProjectService/ListProjects",
    "/relay.v1.ProjectService/GetProject",
    "/relay.v1.ProjectService/CreateProject",
    "/relay.v1.KeyService/MintKey",
    "/relay.v1.RoutingService/CreateEndpoint",
    "/relay.v1.RequestLogService/ListRequests",
    "/relay.v1.EdgeService/ResolveKey",
    "/relay.v1.EdgeService/WatchChanges",
    "/grpc.health.v1.Health/Check",
  ]);
}

function controlToken(r: Random, t: FuzzTarget): Header[] {
  return r.pick<Header[]>([
    [],
    [["Authorization", `Bearer ${t.project.ownerToken}`]],
    [["Authorization", `Bearer ${t.adminToken}`]],
    [["Authorization", randomAuth(r, t.project.ownerToken)]],
  ]);
}

const controlHost: Header[] = [["Host", "127.0.0.1"]];

const controlFamilies: Record<string, Family> = {
  "control bad json": (r, t) => ({
    component: "control",
    kind: "control bad json",
    parts: [
      http1(
        `${r.pick(["POST", "PUT"])} ${controlPath(r, t)} HTTP/1.1`,
        [...controlHost, ...controlToken(r, t), JSON_TYPE, CLOSE],
        badJson(r),
      ),
    ],
  }),
  "control connect garbage": (r, t) => {
    const type = r.pick([
      "application/proto",
      "application/json",
      "application/connect+proto",
      "application/grpc-web+proto",
      "application/grpc",
      "text/plain",
    ]);
    // A gRPC(-Web) frame that announces far more than it carries.
    const frame = Buffer.concat([Buffer.from([0, 0xff, 0xff, 0xff, 0xff]), r.bytes(16)]);
    const body = type.includes("grpc") || type.includes("connect+") ? frame : r.bytes(r.int(300));
    return {
      component: "control",
      kind: "control connect garbage",
      parts: [
        http1(
          `POST ${controlPath(r, t)} HTTP/1.1`,
          [
            ...controlHost,
            ...controlToken(r, t),
            ["Content-Type", type],
            ["Connect-Protocol-Version", r.pick(["1", "2", ""])],
            ["Connect-Timeout-Ms", r.pick(["1", "-5", "abc", "99999999999", "1000"])],
            CLOSE,
          ],
          body,
        ),
      ],
    };
  },
  "control compressed bomb": (r, t) => {
    const connect = r.next() < 0.5;
    const path = connect ? "/relay.v1.ProjectService/ListProjects" : "/projects";
    const bomb = gzipBomb(r.pick([1, 8, 64]));
    const encoding: Header = connect
      ? r.pick<Header>([
          ["Content-Encoding", "gzip"],
          ["Content-Encoding", "br"],
          ["Connect-Content-Encoding", "gzip"],
        ])
      : ["Content-Encoding", "gzip"];
    return {
      component: "control",
      kind: "control compressed bomb",
      parts: [
        http1(
          `POST ${path} HTTP/1.1`,
          [...controlHost, ...controlToken(r, t), JSON_TYPE, encoding, CLOSE],
          bomb,
        ),
      ],
      timeoutMs: 15_000,
    };
  },
  "control odd path": (r, t) => ({
    component: "control",
    kind: "control odd path",
    parts: [
      http1(
        Buffer.concat([
          Buffer.from(`${r.pick(["GET", "POST", "DELETE", "PUT"])} `),
          Buffer.from(
            r.pick([
              () => oddTarget(r, controlPath(r, t)),
              () => `/projects/${t.project.slug}/requests/req_%00`,
              () => `/projects/%E0/keys`,
              () => `/projects/${t.project.slug}/lines/%E0%80/endpoints`,
              () => `/projects/${t.project.slug}/keys/${"k".repeat(5000)}/revoke`,
              () =>
                `/projects/${t.project.slug}/requests?limit=${r.pick(["-1", "abc", "1e9", "%00", "99999999999999999999"])}&cursor=${r.pick(["%E0", "x", "%00", "-1"])}`,
              () => `/projects/${t.project.slug}/failures?status=${r.text(5)}&endpoint=%E0`,
              () =>
                `/assets/${r.pick(["..%2f..%2fpackage.json", "%E0", "%00.js", "../../etc/passwd"])}`,
              () => `/panel/${r.pick(["%E0", "%00", "..%2f"])}`,
            ])(),
          ),
          Buffer.from(" HTTP/1.1"),
        ]),
        [...controlHost, ...controlToken(r, t), JSON_TYPE, CLOSE],
        Buffer.from("{}"),
      ),
    ],
  }),
  "control odd host": (r, t) => ({
    component: "control",
    kind: "control odd host",
    parts: [
      http1(`GET ${controlPath(r, t)} HTTP/1.1`, [
        ["Host", oddHost(r, "control", t.controlPort)],
        ...controlToken(r, t),
        CLOSE,
      ]),
    ],
  }),
  "control random token": (r, t) => ({
    component: "control",
    kind: "control random token",
    parts: [
      http1(`GET ${controlPath(r, t)} HTTP/1.1`, [
        ...controlHost,
        ["Authorization", randomAuth(r, t.project.ownerToken)],
        CLOSE,
      ]),
    ],
  }),
  "control lying length": (r, t) =>
    lyingLength("control", r, t, `POST /projects/${t.project.slug}/lines HTTP/1.1`, controlHost),
  "control huge headers": (r, t) =>
    hugeHeaders("control", r, `POST ${controlPath(r, t)} HTTP/1.1`, controlHost),
  "control duplicate headers": (r, t) =>
    duplicateHeaders("control", r, `POST ${controlPath(r, t)} HTTP/1.1`, [
      ...controlHost,
      ["Authorization", `Bearer ${t.project.ownerToken}`],
    ]),
  "control slow body": (r, t) =>
    slowBody("control", r, `POST /projects/${t.project.slug}/lines HTTP/1.1`, [
      ...controlHost,
      ["Authorization", `Bearer ${t.project.ownerToken}`],
    ]),
  "control raw garbage": (r) => rawGarbage("control", r),
};

/** Slow and compressed probes cost seconds or megabytes each: a few of them go a long way. */
const RARE = new Set([
  "edge slow body",
  "control slow body",
  "control compressed bomb",
  "edge compressed body",
]);

function chooseFamily(r: Random): Family {
  const all = { ...edgeFamilies, ...controlFamilies };
  for (;;) {
    const name = r.pick(Object.keys(all));
    if (!RARE.has(name) || r.next() < 0.05) return all[name] as Family;
  }
}

/** Writes the probe on a fresh connection and reads the status line of its answer. */
export function send(port: number, probe: Probe): Promise<Answer> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1" });
    let received = Buffer.alloc(0);
    let settled = false;
    const done = (answer: Answer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(answer);
    };
    const timer = setTimeout(() => done("timeout"), probe.timeoutMs ?? 5000);
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]).subarray(-65_536);
      // Interim answers (100 Continue) come before the real one.
      for (;;) {
        const match = /^HTTP\/1\.[01] (\d{3})[^\r\n]*\r?\n/.exec(received.toString("latin1"));
        if (!match) return;
        const status = Number(match[1]);
        if (status >= 200) return done(status);
        const end = received.indexOf("\r\n\r\n");
        if (end < 0) return;
        received = received.subarray(end + 4);
      }
    });
    socket.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code === "ECONNREFUSED") done("refused");
      else done(error.code === "ECONNRESET" || error.code === "EPIPE" ? "reset" : "closed");
    });
    socket.on("close", () => done("closed"));
    socket.on("connect", async () => {
      for (const part of probe.parts) {
        if (settled || socket.destroyed) return;
        if (typeof part === "number") await new Promise((r) => setTimeout(r, part));
        else socket.write(part);
      }
      if (probe.endAfter && !settled) socket.end();
    });
  });
}

export const statusClass = (answer: Answer) =>
  typeof answer === "number" ? `${Math.floor(answer / 100)}xx` : answer;

/** The request as written, printable: at most 600 characters of it. */
function shown(probe: Probe): string {
  const bytes = Buffer.concat(probe.parts.filter((p): p is Buffer => Buffer.isBuffer(p)));
  const text = bytes.subarray(0, 600).toString("latin1");
  return bytes.length > 600 ? `${text}... (${bytes.length} bytes)` : text;
}

/**
 * Sends `count` probes, `concurrency` at a time, stopping early at `deadline` (epoch ms) or when
 * `signal` aborts. Deterministic for a seed, up to the order answers arrive in.
 */
export async function fuzz(
  target: FuzzTarget,
  options: {
    count: number;
    concurrency: number;
    seed: number;
    deadline: number;
    signal?: AbortSignal;
  },
): Promise<FuzzReport> {
  const r = random(options.seed);
  const started = performance.now();
  const report: FuzzReport = {
    sent: 0,
    byClass: { edge: {}, control: {} },
    byKind: {},
    serverErrors: {},
    internalErrors: [],
    internalErrorCount: 0,
    seconds: 0,
  };
  const next = () => {
    if (report.sent >= options.count || Date.now() > options.deadline) return null;
    if (options.signal?.aborted) return null;
    report.sent++;
    return chooseFamily(r)(r, target);
  };
  const lane = async () => {
    for (let probe = next(); probe; probe = next()) {
      const port = probe.component === "edge" ? target.edgePort : target.controlPort;
      const answer = await send(port, probe);
      const cls = statusClass(answer);
      const counts = report.byClass[probe.component];
      counts[cls] = (counts[cls] ?? 0) + 1;
      const kind = report.byKind[probe.kind] ?? {};
      kind[cls] = (kind[cls] ?? 0) + 1;
      report.byKind[probe.kind] = kind;
      if (typeof answer === "number" && answer >= 500) {
        const key = `${probe.component} ${answer}`;
        report.serverErrors[key] = (report.serverErrors[key] ?? 0) + 1;
      }
      if (answer === 500) {
        report.internalErrorCount++;
        if (report.internalErrors.length < 50) {
          report.internalErrors.push({
            component: probe.component,
            kind: probe.kind,
            status: answer,
            request: shown(probe),
          });
        }
      }
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, lane));
  report.seconds = (performance.now() - started) / 1000;
  return report;
}

/** Sets up the project every probe aims at, through the REST API. */
export async function fuzzProject(
  controlUrl: string,
  adminToken: string,
  targetUrl: string,
): Promise<FuzzTarget["project"]> {
  const call = async (token: string, method: string, path: string, body: unknown) => {
    const response = await fetch(`${controlUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const answer = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`${method} ${path}: ${JSON.stringify(answer)}`);
    return answer;
  };
  const slug = `fuzz${Date.now().toString(36)}`;
  const created = await call(adminToken, "POST", "/projects", { slug, name: slug, plan: "paid" });
  const ownerToken = created.ownerToken as string;
  const base = `/projects/${slug}`;
  await call(ownerToken, "POST", `${base}/lines`, { key: "v1" });
  await call(ownerToken, "POST", `${base}/lines/v1/endpoints`, {
    path: "hook",
    targets: [{ name: "sink", targetUrl }],
  });
  await call(ownerToken, "POST", `${base}/lines/v1/endpoints`, {
    path: "strict",
    targets: [{ name: "sink", targetUrl }],
    schema: {
      type: "object",
      required: ["n"],
      properties: { n: { type: "integer" }, s: { type: "string", maxLength: 100 } },
    },
  });
  const minted = await call(ownerToken, "POST", `${base}/keys`, { name: "fuzz", mode: "live" });
  return { slug, ownerToken, key: minted.plaintext as string };
}
