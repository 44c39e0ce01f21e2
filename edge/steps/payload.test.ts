import { expect, test } from "vitest";
import { payload } from "./payload.ts";
import { arrived, hookEndpoint, passed, received, refusal } from "./testing.ts";

const typed = hookEndpoint({
  schema: { type: "object", required: ["id"], properties: { id: { type: "string" } } },
});

function call(text: string, contentType: string | null, endpoint = hookEndpoint()) {
  const headers: Record<string, string> = contentType ? { "content-type": contentType } : {};
  const envelope = received(arrived({ headers }), endpoint);
  envelope.body = new TextEncoder().encode(text);
  return envelope;
}

test("without a schema any body passes, but one that says it is JSON must be JSON", async () => {
  const next = passed();
  await payload(call("not json", "text/plain"), next);
  await payload(call('{"a":1}', "application/vnd.x+json; charset=utf-8"), next);
  expect(next.handed).toHaveLength(2);
  const refused = await refusal(payload(call("{", "application/json"), next));
  expect([refused.code, refused.message]).toEqual([
    "unsupported_media_type",
    "the body is not valid JSON",
  ]);
});

test("with a schema the body must be JSON (415) that satisfies it (422 with details)", async () => {
  const next = passed();
  await payload(call('{"id":"x"}', "application/json", typed), next);
  expect(next.handed).toHaveLength(1);
  const untyped = await refusal(payload(call('{"id":"x"}', "text/plain", typed), next));
  expect(untyped.code).toBe("unsupported_media_type");
  const invalid = await refusal(payload(call('{"id":1}', "application/json", typed), next));
  expect(invalid.code).toBe("validation_failed");
  expect(invalid.toBody().error.details?.length).toBeGreaterThan(0);
});
