/**
 * What the payload codec costs a delivery (`npm run bench:codec`). A stack delivers requests of
 * 1 KiB and of 256 KiB (the largest body that travels inline); each one's history, read without
 * the codec, shows the payloads sealed for it: how many, how large. In the same process, sealing
 * and opening those very payloads is timed (this process's CPU, with Web Crypto as the edge seals
 * and with node:crypto as the worker and the control plane do) against converting the same
 * values without a codec (the JSON work Temporal's converter does for every payload anyway), so
 * each delivery's codec CPU stands beside its baseline. Then sustained delivery, over which the
 * edge's, the worker's and the control plane's CPU per delivery (/proc) is what the codec's share
 * is read against. Prints a table, writes JSON.
 */
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client, Connection } from "@temporalio/client";
import { defaultPayloadConverter } from "@temporalio/common";
import { request } from "undici";
import { type Payload, PayloadCipher, SEALED_ENCODING, webAesGcm } from "../core/payload-codec.ts";
import { nodeAesGcm } from "../platform/node-crypto.ts";
import { relayDataConverter } from "../platform/temporal.ts";
import { deliveredPerSecond } from "./delivery.ts";
import { benchStack, followReceipts, processCpuMs, quick, runBench } from "./harness.ts";

const perSize = quick ? 2 : 10;
const rounds = quick ? 20 : 200;
const deliverySeconds = Number(process.env.BENCH_DELIVERY_SECONDS ?? (quick ? 3 : 20));
const sizes = { "1 KiB": 1024, "256 KiB": 256 * 1024 } as const;

const sealedEncoding = new TextEncoder().encode(SEALED_ENCODING);
const isSealed = (payload: Payload) =>
  Buffer.from(payload.metadata?.encoding ?? []).equals(sealedEncoding);

/** Every payload anywhere in a history (inputs, results, markers' results, failures). */
function payloadsIn(value: unknown, found: Payload[] = []): Payload[] {
  if (!value || typeof value !== "object") return found;
  const candidate = value as Payload;
  if (candidate.metadata && candidate.data instanceof Uint8Array) found.push(candidate);
  else for (const child of Object.values(value)) payloadsIn(child, found);
  return found;
}

/**
 * Microseconds of this process's CPU (all its threads: Web Crypto runs on libuv's pool) per round
 * of `work`, over `rounds` rounds after a warm-up: CPU rather than wall time, which on a busy
 * machine mostly measures waiting for a core.
 */
async function cpuMicrosPerRound(work: () => Promise<unknown> | unknown): Promise<number> {
  for (let i = 0; i < Math.max(5, rounds / 10); i++) await work();
  const started = process.cpuUsage();
  for (let i = 0; i < rounds; i++) await work();
  const used = process.cpuUsage(started);
  return (used.user + used.system) / rounds;
}

await runBench(async (cleanup) => {
  const dir = await mkdtemp(join(tmpdir(), "relay-bench-codec-"));
  cleanup.add(() => rm(dir, { recursive: true, force: true }));
  const { stack, targetPort, slug, key } = await benchStack(cleanup, dir);
  // As the worker's: node:crypto (the edge's Web Crypto seals one payload per delivery).
  const cipher = await PayloadCipher.fromSecrets([stack.secrets.encryptionKey], nodeAesGcm);
  const webCipher = await PayloadCipher.fromSecrets([stack.secrets.encryptionKey], webAesGcm);
  const connection = await Connection.connect({ address: stack.temporal.address });
  cleanup.add(() => connection.close());
  // No codec: it reads the histories as Temporal holds them.
  const plainClient = new Client({ connection });
  const relayClient = new Client({ connection, dataConverter: relayDataConverter(cipher) });
  const targetUrl = `http://127.0.0.1:${targetPort}`;

  const rows: {
    body: string;
    payloadsPerDelivery: number;
    sealedPerDelivery: number;
    sealedKiB: number;
    plainKiB: number;
    converterOnlyUs: number;
    /** The codec's own CPU with Web Crypto (the edge's), then with node:crypto (the worker's). */
    webCodecUs: number;
    codecUs: number;
  }[] = [];
  for (const [label, bytes] of Object.entries(sizes)) {
    const body = JSON.stringify({ pad: "x".repeat(bytes - 10) });
    const received = new Set<string>();
    const receipts = await followReceipts(targetUrl, (id) => received.add(id));
    const ids: string[] = [];
    for (let i = 0; i < perSize; i++) {
      const answer = await request(`${stack.edgeUrl}/v1/async`, {
        method: "POST",
        headers: {
          host: `${slug}.localhost`,
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
        },
        body,
      });
      const text = await answer.body.text();
      if (answer.statusCode !== 202) throw new Error(`${answer.statusCode} ${text}`);
      ids.push((JSON.parse(text) as { requestId: string }).requestId);
    }
    const deadline = Date.now() + 60_000;
    while (ids.some((id) => !received.has(id)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    await receipts.stop();
    // A delivery's workflow closes just after the target's receipt.
    await Promise.all(ids.map((id) => relayClient.workflow.getHandle(id).result()));

    const perDelivery = await Promise.all(
      ids.map(async (id) => {
        const history = await plainClient.workflow.getHandle(id).fetchHistory();
        const all = payloadsIn(history);
        const sealed = all.filter(isSealed);
        return { all: all.length, sealed, opened: await cipher.decode(sealed) };
      }),
    );
    const sample = perDelivery[0];
    if (!sample) throw new Error("no delivery");
    const { sealed, opened } = sample;
    const values = opened.map((payload) => defaultPayloadConverter.fromPayload(payload));
    // Without a codec: each value to its payload and back, as the converter does anyway.
    const converterOnly = await cpuMicrosPerRound(() =>
      values.map((value) =>
        defaultPayloadConverter.fromPayload(defaultPayloadConverter.toPayload(value)),
      ),
    );
    // With it: the same, and each payload sealed and opened once.
    const withCodec = (codec: PayloadCipher) =>
      cpuMicrosPerRound(async () => {
        const payloads = values.map((value) => defaultPayloadConverter.toPayload(value));
        const out = await codec.decode(await codec.encode(payloads));
        return out.map((payload) => defaultPayloadConverter.fromPayload(payload));
      });
    const viaNode = await withCodec(cipher);
    const viaWeb = await withCodec(webCipher);
    rows.push({
      body: label,
      payloadsPerDelivery: sample.all,
      sealedPerDelivery: sealed.length,
      sealedKiB: sealed.reduce((sum, p) => sum + (p.data?.byteLength ?? 0), 0) / 1024,
      plainKiB: opened.reduce((sum, p) => sum + (p.data?.byteLength ?? 0), 0) / 1024,
      converterOnlyUs: converterOnly,
      webCodecUs: viaWeb - converterOnly,
      codecUs: viaNode - converterOnly,
    });
  }

  const relayProcesses = ["edge", "worker", "control"] as const;
  const cpuNow = async () => {
    let total = 0;
    for (const name of relayProcesses) total += await processCpuMs(stack, name);
    return total;
  };
  const cpuBefore = await cpuNow();
  const delivery = await deliveredPerSecond({
    edgeUrl: stack.edgeUrl,
    path: "/v1/async",
    host: `${slug}.localhost`,
    auth: `Bearer ${key}`,
    targetUrl,
    concurrency: 32,
    seconds: deliverySeconds,
  });
  // What Relay's own processes spent per delivery (Temporal's server and Postgres apart).
  const delivered = delivery.deliveredPerSecond * deliverySeconds;
  const cpuPerDeliveryUs = (((await cpuNow()) - cpuBefore) * 1000) / delivered;

  console.log(`\nThe payload codec's CPU per delivery (${rounds} rounds each, this process):`);
  console.log(
    "| body | payloads in its history | sealed | sealed KiB | plain KiB | converter alone | codec, Web Crypto | codec, node:crypto | node:crypto's share of a 1 KiB delivery's CPU |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const r of rows) {
    console.log(
      `| ${r.body} | ${r.payloadsPerDelivery} | ${r.sealedPerDelivery} | ${r.sealedKiB.toFixed(1)} | ${r.plainKiB.toFixed(1)} | ${r.converterOnlyUs.toFixed(0)} µs | ${r.webCodecUs.toFixed(0)} µs | ${r.codecUs.toFixed(0)} µs | ${r.body === "1 KiB" ? `${((100 * r.codecUs) / cpuPerDeliveryUs).toFixed(1)}%` : "(sustained load is 1 KiB)"} |`,
    );
  }
  console.log(
    `\nSustained delivery (32 callers, 1 KiB bodies, ${deliverySeconds} s): ${delivery.deliveredPerSecond.toFixed(1)}/s; the edge, the worker and the control plane spent ${(cpuPerDeliveryUs / 1000).toFixed(2)} ms of CPU per delivery (/proc), the base of the share above.`,
  );
  await mkdir("bench/results", { recursive: true });
  await writeFile(
    "bench/results/codec.json",
    JSON.stringify({ rows, delivery, cpuPerDeliveryUs }, null, 2),
  );
  console.log("wrote bench/results/codec.json");
});
