/**
 * One language's round of the quick start check: its receiver behind an endpoint of its own,
 * its caller against the edge, then a redelivery and a forgery posted to the receiver.
 */
import { randomBytes } from "node:crypto";
import { Webhook } from "standardwebhooks";
import type { Commands, Name } from "./quickstart-languages.ts";
import { Background, type Ran, run } from "./quickstart-run.ts";

/**
 * The callers reach the edge as the quick start prints it, `http://localhost:{port}/demo/...`:
 * on a dev stack the project may lead the path, since `{project}.localhost` names do not resolve
 * for Node, Python or Go on every machine (glibc without systemd-resolved).
 */
export const PROJECT = "demo";
/** `--verbose`: every caller's and receiver's output, passed or not. */
const VERBOSE = process.argv.includes("--verbose");

const literal = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Signs `body` as Relay signs a delivery, with `secret`, and posts it to the receiver. */
async function postSigned(port: number, secret: string, id: string, body: string) {
  const now = new Date();
  const response = await fetch(`http://127.0.0.1:${port}/hook`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-relay-delivery-id": id,
      "x-relay-request-id": id.split(".")[0] ?? id,
      "x-relay-attempt": "2",
      "webhook-id": id,
      "webhook-timestamp": String(Math.floor(now.getTime() / 1000)),
      "webhook-signature": new Webhook(secret).sign(id, now, body),
    },
    body,
  });
  await response.arrayBuffer();
  return response.status;
}

function outputs(language: Name, caller: Ran | undefined, receiver: Background): string {
  return [
    `--- ${language} caller output ---\n${caller?.output.trimEnd() ?? "(not run)"}`,
    `--- ${language} receiver output ---\n${receiver.output.trimEnd()}`,
  ].join("\n");
}

/**
 * One language's round: its receiver behind an endpoint of its own, its caller against the edge;
 * resolves with what was checked, or throws with the outputs.
 */
export async function exercise(
  language: Name,
  commands: Commands,
  relay: { edgePort: number; apiKey: string; endpoint: string; secret: string; port: number },
): Promise<string> {
  const { port, secret } = relay;
  const receiver = new Background(commands.receiver, {
    ...commands.env,
    PORT: String(port),
    RELAY_SIGNING_SECRET: secret,
  });
  let caller: Ran | undefined;
  try {
    await receiver.waitFor(/receiver listening/, 30_000);
    caller = await run(commands.caller, {
      env: {
        ...commands.env,
        RELAY_URL: `http://localhost:${relay.edgePort}/${PROJECT}/v1/${relay.endpoint}`,
        RELAY_API_KEY: relay.apiKey,
      },
      timeoutMs: 60_000,
    });
    if (caller.code !== 0) throw new Error(`the caller exited with ${caller.code}`);
    const line = (pattern: RegExp) => {
      const match = caller?.output.match(pattern);
      if (!match) throw new Error(`the caller printed no ${pattern}`);
      return match;
    };
    const [, queued = ""] = line(/^async call: queued (req_\S+)$/m);
    const [, first = "", repeat] = line(/^idempotent call: (req_\S+), repeated: (req_\S+)$/m);
    if (first !== repeat)
      throw new Error("the repeat with the same Idempotency-Key got another id");
    const [, scheduled = ""] = line(/^delayed call: scheduled (req_\S+)$/m);
    line(/^refused: 400 bad_request: \S/m);

    // Each request delivered once and verified; the delayed one about 10 s later.
    const deliveries: string[] = [];
    for (const requestId of [queued, first, scheduled]) {
      const id = literal(requestId);
      const [, deliveryId = ""] = await receiver.waitFor(
        new RegExp(`verified delivery (${id}\\.\\S+) of ${id}:`),
        60_000,
      );
      deliveries.push(deliveryId);
    }
    const verified = /verified delivery /;
    if (receiver.count(verified) !== 3) throw new Error("the receiver verified more than 3");

    // A retry of a delivery Relay made (same id, new timestamp and signature) is dropped...
    const [again = ""] = deliveries;
    const retried = await postSigned(port, secret, again, '{"order":1001,"total":25}');
    if (retried < 200 || retried > 299) throw new Error(`a redelivery was answered ${retried}`);
    await receiver.waitFor(new RegExp(`duplicate delivery ${literal(again)}, dropped`), 10_000);
    // ...and one signed with another secret is refused.
    const otherSecret = `whsec_${randomBytes(32).toString("base64")}`;
    const forged = await postSigned(port, otherSecret, `${queued}.forged`, '{"order":666}');
    if (forged !== 400) throw new Error(`a forged delivery was answered ${forged}, not 400`);
    await receiver.waitFor(/refused: /, 10_000);
    if (receiver.count(verified) !== 3) throw new Error("the receiver took a forgery");
    if (VERBOSE) console.log(outputs(language, caller, receiver));
    return [
      "3 deliveries verified (one delayed 10 s)",
      "the repeat with an Idempotency-Key queued nothing",
      "a redelivery dropped, a forgery refused (400)",
    ].join(", ");
  } catch (error) {
    throw new Error(`${(error as Error).message}\n${outputs(language, caller, receiver)}`);
  } finally {
    await receiver.stop();
  }
}
