/**
 * "Send again": a new request (a new id, `resentFrom` the original) to the original's endpoint,
 * with the original's headers and its body or an edited one. It goes the way a call the edge
 * queues goes: checked against the endpoint as it is now (its size cap, its schema), its
 * credits held, a large body stored by reference, one delivery workflow for the targets whose
 * filters it matches, which logs and bills it like any other (one every target skips is logged
 * as skipped, as the edge logs such a call).
 */
import { z } from "zod";
import { toBase64 } from "../../core/base64.ts";
import { deliveryHolds } from "../../core/billing.ts";
import { bodyTravelsInline, type DeliveryInput, skippedTargets } from "../../core/delivery.ts";
import { RelayError } from "../../core/errors.ts";
import { targetsByFilter } from "../../core/filter.ts";
import { BASE64, bodyBytes } from "../../core/inspect.ts";
import { checkPayload } from "../../core/payload-check.ts";
import { compileSchema } from "../../core/schema.ts";
import { newId } from "../../core/secrets.ts";
import { insertBody } from "../../store/bodies.ts";
import { releaseHolds } from "../../store/credits.ts";
import { recordSkipped } from "../../store/request-log.ts";
import { findRequest, keyModeOf } from "../../store/request-views.ts";
import { loadEndpoints } from "../../store/routing.ts";
import { releasePlaces } from "../../store/waiting.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { contentErased } from "./erase.ts";
import { reserveMemberDelivery } from "./member-holds.ts";
import { startDelivery } from "./replay.ts";
import { getRequest, type RequestView } from "./requests.ts";
import { parseInput } from "./validation.ts";

export const sendAgainBody = z.strictObject({
  // One variant per encoding, so the document states the base64 one's pattern (Schemathesis).
  body: z
    .discriminatedUnion("encoding", [
      z.strictObject({ encoding: z.literal("utf8"), text: z.string() }),
      z.strictObject({
        encoding: z.literal("base64"),
        text: z.string().regex(BASE64, "not base64 (the standard alphabet, padded)"),
      }),
    ])
    .optional()
    .describe("The body to send: text as it is, or bytes in base64; absent, the original's"),
});

/** A new request's caller headers: the original's, less what made the original one of a kind. */
const NOT_SENT_AGAIN = ["idempotency-key"];

export async function sendAgain(
  ctx: Ctx,
  slug: string,
  requestId: string,
  input: unknown,
): Promise<RequestView> {
  const access = await projectAccess(ctx, slug);
  const { body: edited } = parseInput(sendAgainBody, input ?? {});
  const [original, keyMode] = await Promise.all([
    findRequest(ctx.sql, access.projectId, requestId),
    keyModeOf(ctx.sql, access.projectId, requestId),
  ]);
  if (!original || !keyMode)
    throw new RelayError("not_found", `no request '${requestId}' in the log`);
  const erased = contentErased(original, "sent again");
  if (erased) throw erased;
  const kept = original.headers && (edited ?? original.body);
  if (!original.headers || !kept) {
    throw new RelayError(
      "conflict",
      `request '${requestId}' was logged before the log kept headers and bodies: it cannot be sent again`,
    );
  }
  const body = bodyBytes(kept);
  if (body.byteLength > ctx.maxBodyBytes) {
    throw new RelayError("payload_too_large", `the body exceeds ${ctx.maxBodyBytes} bytes`);
  }
  const [endpoint] = await loadEndpoints(ctx.sql, access.projectId, {
    line: original.line,
    path: original.endpoint,
  });
  if (!endpoint) {
    throw new RelayError(
      "not_found",
      `endpoint '${original.line}/${original.endpoint}' no longer exists`,
    );
  }
  if (endpoint.targets.some((t) => t.deliveryMode !== "async")) {
    throw new RelayError(
      "conflict",
      "only an endpoint whose targets are all async sends again: a sync or stream target answers a caller",
    );
  }
  const headers = Object.fromEntries(
    Object.entries(original.headers).filter(([name]) => !NOT_SENT_AGAIN.includes(name)),
  );
  const payload = checkPayload(
    body,
    headers["content-type"] ?? null,
    endpoint.schema ? compileSchema(endpoint.schema) : null,
  );
  const resent = newId("req");
  const { kept: targets, skipped } = targetsByFilter(
    endpoint.targets,
    body,
    new Headers(headers),
    payload,
  );
  const opening = {
    requestId: resent,
    project: slug,
    line: original.line,
    endpoint: original.endpoint,
    keyMode,
    receivedAt: ctx.now().toISOString(),
    bodyBytes: body.byteLength,
    resentFrom: requestId,
    ...(skipped.length > 0 && { skipped: skippedTargets(skipped) }),
  };
  if (targets.length === 0) {
    await recordSkipped(ctx.sql, { ...opening, skipped: skippedTargets(skipped) });
    return getRequest(ctx, slug, resent);
  }
  await ctx.sql.begin((tx) =>
    reserveMemberDelivery(ctx, tx, access, {
      requestId: resent,
      pool: keyMode,
      holds: deliveryHolds(targets, body.byteLength),
      // Sent again, a request is a new one, in no lane.
      waits: { workflowId: resent, targets },
    }),
  );
  try {
    const inline = bodyTravelsInline(body.byteLength, targets.length);
    const bodyRef = inline ? null : await insertBody(ctx.sql, slug, resent, body);
    const delivery: DeliveryInput = {
      ...opening,
      headers,
      bodyBase64: bodyRef ? "" : toBase64(body),
      ...(bodyRef && { bodyRef }),
      targets,
    };
    await startDelivery(await ctx.temporal(), delivery, resent, "queued");
  } catch (error) {
    await ctx.sql.begin(async (tx) => {
      await releaseHolds(tx, resent);
      await releasePlaces(tx, resent, ctx.waitingCaps);
    });
    throw error;
  }
  return getRequest(ctx, slug, resent);
}
