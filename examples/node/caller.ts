/**
 * Calls a Relay endpoint four ways: an async call, a call safe to repeat (Idempotency-Key), a
 * delayed call (Relay-Delay), and one Relay refuses, to read its error body.
 *
 *   RELAY_URL=http://localhost:8787/demo/v1/orders RELAY_API_KEY=rk_live_... npx tsx caller.ts
 */
const url = process.env.RELAY_URL ?? "";
const apiKey = process.env.RELAY_API_KEY ?? "";

/** A call Relay refused: its HTTP status and the `{"error": {"code", "message"}}` it sent. */
class RelayError extends Error {
  status: number;
  code: string;
  constructor(status: number, code: string, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** POSTs `body` as JSON; an async endpoint answers 202 `{status, requestId}`. */
async function relay(body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) throw new RelayError(response.status, answer.error.code, answer.error.message);
  return answer as { status: "queued" | "scheduled"; requestId: string };
}

// 1. An async call: queued at once, then delivered to every target, retried until it is.
const queued = await relay({ order: 1001, total: 25 });
console.log(`async call: ${queued.status} ${queued.requestId}`);

// 2. With an Idempotency-Key, a repeat (after a timeout, a 503) queues nothing again: it gets
//    the first call's answer, the same requestId.
const key = { "idempotency-key": "order-1002" };
const first = await relay({ order: 1002, total: 40 }, key);
const repeat = await relay({ order: 1002, total: 40 }, key);
console.log(`idempotent call: ${first.requestId}, repeated: ${repeat.requestId}`);

// 3. A delayed call: scheduled now, delivered in 10 seconds (or at Relay-Not-Before: <RFC 3339>).
const scheduled = await relay({ order: 1003, remind: true }, { "relay-delay": "10s" });
console.log(`delayed call: ${scheduled.status} ${scheduled.requestId}`);

// 4. A refusal: more than 7 days ahead is 400 bad_request.
try {
  await relay({ order: 1004 }, { "relay-delay": "8d" });
} catch (error) {
  if (!(error instanceof RelayError)) throw error;
  console.log(`refused: ${error.status} ${error.code}: ${error.message}`);
}
