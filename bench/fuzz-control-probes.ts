/**
 * The control plane's probe families: management calls (REST and Connect) with bad JSON,
 * Connect and gRPC garbage, compressed bombs, odd paths and hosts, random tokens, and the
 * malformations both components get.
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
import { badJson, gzipBomb, oddHost, oddTarget, type Random, randomAuth } from "./fuzz-values.ts";
import { CLOSE, type Header, http1, JSON_TYPE } from "./fuzz-wire.ts";

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

export const controlFamilies: Record<string, Family> = {
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
