/**
 * The edge's probe families: inbound calls to a project's endpoints with bad JSON, random keys,
 * odd paths, hosts and methods, compressed bodies, and the malformations both components get.
 */
import {
  duplicateHeaders,
  type Family,
  type FuzzTarget,
  hugeHeaders,
  lyingLength,
  rawGarbage,
  slowBody,
} from "./fuzz-probes.ts";
import { badJson, gzipBomb, oddHost, oddTarget, randomAuth } from "./fuzz-values.ts";
import { CLOSE, type Header, http1, JSON_TYPE } from "./fuzz-wire.ts";

const edgeHost = (t: FuzzTarget): Header[] => [
  ["Host", `${t.project.slug}.localhost:${t.edgePort}`],
];

export const edgeFamilies: Record<string, Family> = {
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
