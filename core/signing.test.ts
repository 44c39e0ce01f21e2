import { expect, test } from "vitest";
import {
  decodeSigningSecret,
  importSigningKey,
  newSigningSecret,
  sign,
  signsAt,
  verify,
  webhookHeaders,
} from "./signing.ts";

/** The example of the Standard Webhooks specification (and of its reference libraries' tests). */
const spec = {
  secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
};
const keyOf = async (secret: string) => importSigningKey(decodeSigningSecret(secret));
const at = (seconds: number) => new Date(seconds * 1000);

test("the specification's example signs to its published signature", async () => {
  const key = await keyOf(spec.secret);
  expect(await sign([key], spec.id, spec.timestamp, spec.body)).toBe(spec.signature);
  // The same bytes given as bytes sign the same.
  const bytes = new TextEncoder().encode(spec.body);
  expect(await sign([key], spec.id, spec.timestamp, bytes)).toBe(spec.signature);
});

test("the example verifies at its time and not with another body, id or secret", async () => {
  const headers = { id: spec.id, timestamp: String(spec.timestamp), signature: spec.signature };
  const now = at(spec.timestamp + 10);
  expect(await verify(spec.secret, headers, spec.body, now)).toBe(true);
  expect(await verify(spec.secret, headers, `${spec.body} `, now)).toBe(false);
  expect(await verify(spec.secret, { ...headers, id: "msg_other" }, spec.body, now)).toBe(false);
  expect(await verify(newSigningSecret(), headers, spec.body, now)).toBe(false);
  // Outside the five-minute tolerance, either way.
  expect(await verify(spec.secret, headers, spec.body, at(spec.timestamp + 301))).toBe(false);
  expect(await verify(spec.secret, headers, spec.body, at(spec.timestamp - 301))).toBe(false);
  expect(await verify(spec.secret, { ...headers, timestamp: "x" }, spec.body, now)).toBe(false);
});

test("several live secrets give several space-separated signatures, each verifying", async () => {
  const other = newSigningSecret();
  const signature = await sign(
    [await keyOf(spec.secret), await keyOf(other)],
    spec.id,
    spec.timestamp,
    spec.body,
  );
  const [first, second, ...rest] = signature.split(" ");
  expect(first).toBe(spec.signature);
  expect(second).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
  expect(rest).toEqual([]);
  const headers = { id: spec.id, timestamp: String(spec.timestamp), signature };
  for (const secret of [spec.secret, other]) {
    expect(await verify(secret, headers, spec.body, at(spec.timestamp))).toBe(true);
  }
});

test("a new secret is whsec_ and 32 random bytes, and each is different", () => {
  const secret = newSigningSecret();
  expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
  expect(decodeSigningSecret(secret)).toHaveLength(32);
  expect(newSigningSecret()).not.toBe(secret);
});

test("a malformed secret is refused", () => {
  expect(() => decodeSigningSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")).toThrow();
  expect(() => decodeSigningSecret("whsec_c2hvcnQ=")).toThrow(); // 5 bytes
  expect(() => decodeSigningSecret("whsec_not base64!")).toThrow();
});

test("a secret signs until its expiry, and the headers carry only the live ones", async () => {
  const old = { key: await keyOf(spec.secret), expiresAt: at(spec.timestamp + 60) };
  const fresh = { key: await keyOf(newSigningSecret()), expiresAt: null };
  expect(signsAt(old, at(spec.timestamp + 59))).toBe(true);
  expect(signsAt(old, at(spec.timestamp + 60))).toBe(false);
  expect(signsAt(fresh, at(4_000_000_000))).toBe(true);

  const during = await webhookHeaders([old, fresh], spec.id, at(spec.timestamp), spec.body);
  expect(during["webhook-id"]).toBe(spec.id);
  expect(during["webhook-timestamp"]).toBe(String(spec.timestamp));
  expect(during["webhook-signature"]?.split(" ")).toHaveLength(2);
  expect(during["webhook-signature"]?.split(" ")[0]).toBe(spec.signature);

  const after = await webhookHeaders([old, fresh], spec.id, at(spec.timestamp + 60), spec.body);
  expect(after["webhook-signature"]?.split(" ")).toHaveLength(1);
  expect(after["webhook-signature"]).not.toContain(spec.signature);

  const none = await webhookHeaders([], spec.id, at(spec.timestamp), spec.body);
  expect(none["webhook-signature"]).toBeUndefined();
});
