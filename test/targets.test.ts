/**
 * Where targets may point. The test stack allows loopback targets (its targets live there), so
 * a second control plane and a second edge run here as production would: without
 * RELAY_ALLOW_PRIVATE_TARGETS, against the same Postgres and Temporal.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import { ManagedProcess } from "../dev/processes.ts";
import {
  api,
  extraEdge,
  finishedLog,
  projectWithEndpoint,
  relay,
  stack,
  stackLog,
  targetServer,
} from "./helpers.ts";

const [strictControlPort = 0, strictEdgePort = 0] = await freePorts(2);
const strictControlUrl = `http://127.0.0.1:${strictControlPort}`;
const strictEdge = { edgeUrl: `http://127.0.0.1:${strictEdgePort}`, edgePort: strictEdgePort };
const production = { RELAY_ALLOW_PRIVATE_TARGETS: "0" };

const strictControl = new ManagedProcess(
  {
    name: "control-strict",
    entry: "control/main.ts",
    readyLine: "control plane listening",
    env: {
      ...production,
      DATABASE_URL: stack().databaseUrl,
      TEMPORAL_ADDRESS: stack().temporalAddress,
      RELAY_CONTROL_PORT: String(strictControlPort),
      RELAY_ADMIN_TOKEN: stack().adminToken,
      RELAY_EDGE_TOKEN: stack().edgeToken,
      RELAY_ENCRYPTION_KEY: randomBytes(32).toString("hex"),
      RELAY_EDGE_DOMAIN: "relay.example.com",
    },
  },
  stackLog(),
);
const strictEdgeProcess = extraEdge("edge-strict", strictEdgePort, production);

beforeAll(() => Promise.all([strictControl.start(), strictEdgeProcess.start()]));
afterAll(() => Promise.all([strictControl.stop(), strictEdgeProcess.stop()]));

/** Saves an endpoint with one target through `controlUrl`; answers the API's status and body. */
async function saveTarget(controlUrl: string, targetUrl: string) {
  const project = await projectWithEndpoint([
    { name: "first", targetUrl: "https://hooks.example.com/in" },
  ]);
  return api<{ error: { code: string; details: { path: string; message: string }[] } }>(
    project.ownerToken,
    "PUT",
    `${project.base}/lines/v1/endpoints/hook`,
    { targets: [{ name: "t", targetUrl }], ipAllowlist: [] },
    controlUrl,
  );
}

test.each([
  ["http://10.0.0.5/hook", "may not point here: 10.0.0.5 is a private address"],
  ["http://127.0.0.1:9000/hook", "may not point here: 127.0.0.1 is a loopback address"],
  ["http://[::1]/hook", "may not point here: ::1 is a loopback address"],
  ["http://169.254.169.254/latest", "may not point here: 169.254.169.254 is a link-local address"],
  ["http://localhost:3000/hook", "points at a loopback address"],
  ["https://acme.relay.example.com/v1/orders", "points at the relay itself"],
  ["file:///etc/passwd", "must be an http or https URL"],
])("a production control plane refuses the target %s: %s", async (targetUrl, message) => {
  const saved = await saveTarget(strictControlUrl, targetUrl);
  expect(saved.status).toBe(400);
  expect(saved.body.error.code).toBe("bad_request");
  expect(saved.body.error.details).toContainEqual({ path: "targets.0.targetUrl", message });
});

test("a target URL over 2,048 characters is refused, naming the field", async () => {
  const saved = await saveTarget(
    stack().controlUrl,
    `https://hooks.example.com/${"a".repeat(2048)}`,
  );
  expect(saved.status).toBe(400);
  expect(saved.body.error.details.map((d) => d.path)).toContain("targets.0.targetUrl");
});

test("a production control plane saves a target on a public name", async () => {
  const saved = await saveTarget(strictControlUrl, "https://billing.example.com/hook");
  expect(saved.status).toBe(200);
});

test("even a dev stack refuses a target on the relay's own inbound host", async () => {
  const saved = await saveTarget(
    stack().controlUrl,
    `http://demo.localhost:${stack().edgePort}/v1/echo`,
  );
  expect(saved.status).toBe(400);
  expect(saved.body.error.details).toContainEqual({
    path: "targets.0.targetUrl",
    message: "points at the relay itself",
  });
});

test("a target whose name resolves to loopback at delivery is refused, logged, never called", async () => {
  const target = await targetServer();
  // Saved where loopback is allowed, then delivered by an edge that checks DNS answers.
  const byName = target.url.replace("127.0.0.1", "localhost");
  const p = await projectWithEndpoint([
    { name: "live", targetUrl: byName, deliveryMode: "stream" },
  ]);
  const answer = await relay(p.slug, "/v1/hook", { key: p.key, body: "{}", edge: strictEdge });
  expect(answer.status).toBe(502);
  expect(answer.json().error.code).toBe("target_unreachable");
  expect(target.received).toHaveLength(0);

  const log = await finishedLog(p, answer.headers["x-relay-request-id"] as string);
  expect(log.status).toBe("failed");
  expect(log.attempts).toHaveLength(1);
  expect(log.attempts[0]?.statusCode).toBeNull();
  expect(log.attempts[0]?.error).toMatch(
    /^target localhost refused: (127\.0\.0\.1|::1) is a loopback address$/,
  );
  await target.close();
});
