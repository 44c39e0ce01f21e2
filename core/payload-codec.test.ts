import { expect, test } from "vitest";
import {
  derivePayloadKeys,
  jsonPayload,
  jsonPayloadValue,
  KEY_ID_METADATA,
  OPERATOR_METADATA,
  type Payload,
  PayloadCipher,
  payloadFromJson,
  payloadToJson,
  SEALED_ENCODING,
  sealedOnly,
  UnsealedPayload,
} from "./payload-codec.ts";

const OLD = "11".repeat(32);
const NEW = "22".repeat(32);
const text = (bytes: Uint8Array | null | undefined) => new TextDecoder().decode(bytes ?? undefined);

test("a sealed payload holds neither its data nor its metadata in clear, and opens to both", async () => {
  const cipher = await PayloadCipher.fromSecrets([NEW]);
  const input = jsonPayload({ bodyBase64: "Y2FyZCA0MjQy", authorization: "Bearer s3cret" });
  const [sealed] = await cipher.encode([input]);
  expect(text(sealed?.metadata?.encoding)).toBe(SEALED_ENCODING);
  expect(text(sealed?.metadata?.[KEY_ID_METADATA])).toBe(cipher.keyId);
  expect(Object.keys(sealed?.metadata ?? {}).sort()).toEqual(["encoding", KEY_ID_METADATA]);
  expect(text(sealed?.data)).not.toContain("s3cret");
  expect(text(sealed?.data)).not.toContain("json/plain");
  const [opened] = await cipher.decode(sealed ? [sealed] : []);
  expect(jsonPayloadValue(opened)).toEqual({
    bodyBase64: "Y2FyZCA0MjQy",
    authorization: "Bearer s3cret",
  });
});

test("each seal is fresh: the same payload twice gives two ciphertexts", async () => {
  const cipher = await PayloadCipher.fromSecrets([NEW]);
  const [a, b] = await cipher.encode([jsonPayload("x"), jsonPayload("x")]);
  expect(a?.data).not.toEqual(b?.data);
});

test("after a key rotation, payloads sealed with the older key still open; new ones use the new key", async () => {
  const before = await PayloadCipher.fromSecrets([OLD]);
  const after = await PayloadCipher.fromSecrets([NEW, OLD]);
  expect(after.keyId).not.toBe(before.keyId);
  const [old] = await before.encode([jsonPayload({ n: 1 })]);
  const [opened] = await after.decode(old ? [old] : []);
  expect(jsonPayloadValue(opened)).toEqual({ n: 1 });
  const [fresh] = await after.encode([jsonPayload({ n: 2 })]);
  expect(text(fresh?.metadata?.[KEY_ID_METADATA])).toBe(after.keyId);
  await expect(before.decode(fresh ? [fresh] : [])).rejects.toThrow(after.keyId);
  // An edge holds the derived keys only, and they open and seal alike.
  const edge = await PayloadCipher.fromKeys(await derivePayloadKeys([NEW, OLD]));
  expect(edge.keyId).toBe(after.keyId);
  const [fromEdge] = await edge.encode([jsonPayload({ n: 3 })]);
  expect(jsonPayloadValue((await after.decode(fromEdge ? [fromEdge] : []))[0])).toEqual({ n: 3 });
});

test("a payload from before the codec passes through unopened", async () => {
  const cipher = await PayloadCipher.fromSecrets([NEW]);
  const plain = jsonPayload({ requestId: "req_1" });
  expect(await cipher.decode([plain])).toEqual([plain]);
});

test("a worker's codec takes sealed payloads only: one in clear is refused, whatever it says", async () => {
  const cipher = await PayloadCipher.fromSecrets([NEW]);
  const worker = sealedOnly(cipher);
  const [sealed] = await worker.encode([jsonPayload({ n: 1 })]);
  const [opened] = await worker.decode(sealed ? [sealed] : []);
  expect(jsonPayloadValue(opened)).toEqual({ n: 1 });
  const forged = jsonPayload({ project: "beta", targets: [{ targetUrl: "http://evil" }] });
  await expect(worker.decode([forged])).rejects.toBeInstanceOf(UnsealedPayload);
  await expect(worker.decode(sealed ? [sealed, forged] : [])).rejects.toBeInstanceOf(
    UnsealedPayload,
  );
});

test("a worker takes the note Temporal's server writes for an activity cancelled before it started, and nothing like it", async () => {
  const worker = sealedOnly(await PayloadCipher.fromSecrets([NEW]));
  const encoding = new TextEncoder().encode("json/plain");
  const note = (data: string, metadata: Record<string, Uint8Array> = {}) => ({
    metadata: { encoding, ...metadata },
    data: new TextEncoder().encode(data),
  });
  const [opened] = await worker.decode([note('"ACTIVITY_ID_NOT_STARTED"')]);
  expect(jsonPayloadValue(opened)).toBe("ACTIVITY_ID_NOT_STARTED");
  for (const other of [
    note('"ACTIVITY_ID_UNKNOWN"'),
    note('"ACTIVITY_ID_NOT_STARTED" '),
    note('"ACTIVITY_ID_NOT_STARTED"', { messageType: encoding }),
  ]) {
    await expect(worker.decode([other])).rejects.toBeInstanceOf(UnsealedPayload);
  }
});

test("a payload an operator sealed reads back, and no worker takes it, even stripped of its mark", async () => {
  const cipher = await PayloadCipher.fromSecrets([NEW]);
  const [sealed] = await cipher.encodeForOperator([jsonPayload({ project: "beta" })]);
  const [read] = await cipher.decode(sealed ? [sealed] : []);
  expect(jsonPayloadValue(read)).toEqual({ project: "beta" });
  const worker = sealedOnly(cipher);
  await expect(worker.decode(sealed ? [sealed] : [])).rejects.toBeInstanceOf(UnsealedPayload);
  const { [OPERATOR_METADATA]: _, ...unmarked } = sealed?.metadata ?? {};
  await expect(worker.decode([{ ...sealed, metadata: unmarked }])).rejects.toThrow();
});

test("a sealed payload altered, or moved under another key id, does not open", async () => {
  const cipher = await PayloadCipher.fromSecrets([NEW, OLD]);
  const other = await PayloadCipher.fromSecrets([OLD]);
  const [sealed] = (await cipher.encode([jsonPayload("x")])) as [Payload];
  const flipped = Uint8Array.from(sealed.data ?? []);
  flipped[flipped.length - 1] = (flipped.at(-1) ?? 0) ^ 1;
  await expect(cipher.decode([{ ...sealed, data: flipped }])).rejects.toThrow();
  const moved = {
    ...sealed,
    metadata: { ...sealed.metadata, [KEY_ID_METADATA]: new TextEncoder().encode(other.keyId) },
  };
  await expect(cipher.decode([moved])).rejects.toThrow();
});

test("a secret that is not 32 bytes of hex is refused", async () => {
  await expect(PayloadCipher.fromSecrets(["abc"])).rejects.toThrow(/64 hex/);
  await expect(PayloadCipher.fromSecrets([])).rejects.toThrow(/at least one/);
});

test("payloads go to protobuf's JSON form and back, as Temporal's HTTP API carries them", () => {
  const payload = jsonPayload({ a: "ü" });
  const json = payloadToJson(payload);
  expect(json.metadata?.encoding).toBe(btoa("json/plain"));
  expect(payloadFromJson(json)).toEqual(payload);
  expect(payloadFromJson({ data: "-_8" }).data).toEqual(new Uint8Array([0xfb, 0xff]));
  expect(() => payloadFromJson({ data: "not base64!" })).toThrow();
});
