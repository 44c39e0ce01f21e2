/**
 * Receives Relay's deliveries: checks each signature with Standard Webhooks' library, drops the
 * duplicates at-least-once delivery brings, and answers 2xx before doing the work.
 *
 *   RELAY_SIGNING_SECRET=whsec_... PORT=8000 npx tsx receiver.ts
 */
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

const webhook = new Webhook(process.env.RELAY_SIGNING_SECRET ?? "");
const port = Number(process.env.PORT ?? 8000);
/** Delivery ids already taken. In production: a unique key in your database, set with the work. */
const seen = new Set<string>();

/** The work itself, after the answer; here, a line. */
function handle(deliveryId: string, requestId: string, payload: unknown) {
  console.log(`verified delivery ${deliveryId} of ${requestId}: ${JSON.stringify(payload)}`);
}

createServer(async (req, res) => {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks); // the raw bytes: verify them before parsing
  let payload: unknown;
  try {
    // Throws unless a signature matches and webhook-timestamp is within 5 minutes of now.
    payload = webhook.verify(body, req.headers as Record<string, string>);
  } catch (error) {
    console.log(`refused: ${(error as Error).message}`);
    res.writeHead(400).end();
    return;
  }
  // The X-Relay-Delivery-Id, sent again as webhook-id, which the signature covers: the same on
  // every retry of this delivery.
  const deliveryId = String(req.headers["webhook-id"]);
  if (seen.has(deliveryId)) {
    console.log(`duplicate delivery ${deliveryId}, dropped`);
  } else {
    seen.add(deliveryId);
    setImmediate(handle, deliveryId, String(req.headers["x-relay-request-id"]), payload);
  }
  res.writeHead(204).end();
}).listen(port, () => console.log(`receiver listening on port ${port}`));
