/**
 * Relay reaches a Temporal frontend that requires TLS: Temporal's own server (so it runs under
 * RELAY_TEMPORAL_SERVER=postgres, as `npm run test:cluster` does) serves gRPC and its HTTP API
 * with a certificate from a CA made for this test, and the edge (HTTP API), the worker (the
 * SDK's native connection) and the control plane (the SDK client) trust that CA through
 * TEMPORAL_TLS_CA. A stack of its own.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { freeStackPorts, type Stack, startStack } from "../dev/stack.ts";
import type { TemporalServerTls } from "../dev/temporal-config.ts";
import { temporalServerKindFromEnv } from "../dev/temporal-server.ts";
import { finishedLog, projectWithEndpoint, relay, targetServer } from "./helpers.ts";

const openssl = (...args: string[]) => promisify(execFile)("openssl", args);

/** A CA, and a certificate it signs for localhost and 127.0.0.1, as PEM files in `dir`. */
async function testCertificates(dir: string): Promise<TemporalServerTls> {
  const file = (name: string) => join(dir, name);
  const key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
  await openssl(
    "req",
    "-x509",
    ...key,
    "-keyout",
    file("ca.key"),
    "-out",
    file("ca.pem"),
    "-days",
    "1",
    "-subj",
    "/CN=Relay test CA",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign,cRLSign",
  );
  await openssl(
    "req",
    ...key,
    "-keyout",
    file("server.key"),
    "-out",
    file("server.csr"),
    "-subj",
    "/CN=localhost",
  );
  await writeFile(
    file("server.ext"),
    "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
  );
  await openssl(
    "x509",
    "-req",
    "-in",
    file("server.csr"),
    "-CA",
    file("ca.pem"),
    "-CAkey",
    file("ca.key"),
    "-CAcreateserial",
    "-out",
    file("server.pem"),
    "-days",
    "1",
    "-extfile",
    file("server.ext"),
  );
  return { certFile: file("server.pem"), keyFile: file("server.key"), caFile: file("ca.pem") };
}

describe.runIf(temporalServerKindFromEnv() !== "dev")("Temporal over TLS", () => {
  let stack: Stack;
  let dir: string;
  let edge: { edgeUrl: string; edgePort: number };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "relay-tls-"));
    const ports = await freeStackPorts();
    stack = await startStack({
      dir,
      ports,
      output: join(dir, "stack.log"),
      temporalServer: "postgres",
      temporalTls: await testCertificates(dir),
    });
    edge = { edgeUrl: stack.edgeUrl, edgePort: ports.edge };
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test("the frontend answers only over TLS, with the test CA's certificate", async () => {
    expect(stack.temporal.httpAddress).toMatch(/^https:/);
    const plain = stack.temporal.httpAddress.replace("https:", "http:");
    const inClear = await request(`${plain}/api/v1/system-info`).then(
      (answer) => answer.statusCode,
      () => "refused",
    );
    expect(inClear).not.toBe(200);
    // Without the CA, the certificate is not trusted.
    await expect(request(`${stack.temporal.httpAddress}/api/v1/system-info`)).rejects.toThrow();
  });

  test("the edge queues through the HTTP API and the worker delivers: async and sync", async () => {
    const target = await targetServer();
    const on = { controlUrl: stack.controlUrl, adminToken: stack.secrets.adminToken };
    const async = await projectWithEndpoint([{ name: "t", targetUrl: target.url }], {}, "paid", on);
    const queued = await relay(async.slug, "/v1/hook", { key: async.key, body: '{"a":1}', edge });
    expect(queued.status).toBe(202);
    const log = await finishedLog(async, queued.json().requestId, 60_000);
    expect(log.status).toBe("delivered");

    const sync = await projectWithEndpoint(
      [{ name: "t", targetUrl: target.url, deliveryMode: "sync" }],
      {},
      "paid",
      on,
    );
    const answered = await relay(sync.slug, "/v1/hook", { key: sync.key, body: "{}", edge });
    expect(answered.status).toBe(200);
    expect(target.received.map((r) => r.body)).toEqual(['{"a":1}', "{}"]);
    await target.close();
  }, 120_000);

  test("the control plane and the worker report Temporal ready", async () => {
    for (const url of [
      stack.controlUrl,
      `http://127.0.0.1:${stack.processes.worker.spec.env.RELAY_WORKER_PORT}`,
    ]) {
      const ready = await request(`${url}/readyz`);
      expect(await ready.body.json()).toMatchObject({ checks: { temporal: "ok" } });
    }
  });
});
