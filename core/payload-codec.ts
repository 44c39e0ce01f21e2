/**
 * Relay's Temporal payload codec: every payload Relay hands Temporal (workflow and activity
 * inputs and results, signals, queries, failures' details) is sealed whole with AES-256-GCM, so
 * Temporal's store, UI and CLI hold ciphertext; search attributes stay plain and hold nothing
 * secret. The keys come from the deployment's secrets: the first seals, all of them open, and
 * each sealed payload names its key's id, so a new key can take over while older histories
 * still open. A payload that is not sealed (a history recorded before the codec) passes
 * through, but a worker takes sealed ones only (`sealedOnly`) unless told. Web Crypto only: the
 * edge seals its starts with it on any runtime.
 *
 * It is a Temporal `PayloadCodec` by shape (the SDK's clients and workers take it as it is).
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { SealedPayloadSchema } from "../gen/relay/v1/payloads_pb.ts";
import { toBase64 } from "./base64.ts";

/** A Temporal payload: `temporal.api.common.v1.Payload` as the SDKs hold it. */
export interface Payload {
  metadata?: Record<string, Uint8Array> | null;
  data?: Uint8Array | null;
}

/** The encoding of a sealed payload, as Temporal's samples name it. */
export const SEALED_ENCODING = "binary/encrypted";
/** The metadata entry naming the key a payload was sealed with. */
export const KEY_ID_METADATA = "encryption-key-id";
/**
 * The metadata entry of a payload an operator sealed through the codec endpoint: sealed under
 * its own context (so stripping the entry does not make it open as Relay's), and never taken by
 * a worker.
 */
export const OPERATOR_METADATA = "relay-sealed-for-operator";

const IV_BYTES = 12;
/** What a deployment secret is stretched with: the codec's key is only the codec's. */
const KEY_INFO = new TextEncoder().encode("relay temporal payload codec v1");
const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder();

/**
 * A codec key: derived from a deployment secret, it opens Temporal's payloads and nothing else,
 * so the edge gets these from the control plane rather than any secret they come from.
 */
export interface PayloadKey {
  id: string;
  /** 32 bytes of AES-256 key. */
  key: Uint8Array;
}

/**
 * AES-256-GCM under one key, as a runtime offers it: Web Crypto anywhere (`webAesGcm`, the
 * edge's), or node:crypto, cheaper per call (platform/node-crypto.ts: the worker's and the control
 * plane's). Sealed bytes are the ciphertext, then its 16-byte tag, as Web Crypto writes them.
 */
export interface AesGcmKey {
  seal(iv: Uint8Array, plaintext: Uint8Array, aad: Uint8Array): Promise<Uint8Array>;
  open(iv: Uint8Array, sealed: Uint8Array, aad: Uint8Array): Promise<Uint8Array>;
}
export type AesGcm = (key: Uint8Array) => Promise<AesGcmKey>;

export const webAesGcm: AesGcm = async (raw) => {
  const key = await crypto.subtle.importKey("raw", Uint8Array.from(raw), "AES-GCM", false, [
    "encrypt",
    "decrypt",
  ]);
  // Copies: Web Crypto takes only views on plain ArrayBuffers.
  const params = (iv: Uint8Array, aad: Uint8Array) => ({
    name: "AES-GCM",
    iv: Uint8Array.from(iv),
    additionalData: Uint8Array.from(aad),
  });
  return {
    async seal(iv, plaintext, aad) {
      return new Uint8Array(
        await crypto.subtle.encrypt(params(iv, aad), key, Uint8Array.from(plaintext)),
      );
    },
    async open(iv, sealed, aad) {
      return new Uint8Array(
        await crypto.subtle.decrypt(params(iv, aad), key, Uint8Array.from(sealed)),
      );
    },
  };
};

interface ImportedKey {
  id: string;
  key: AesGcmKey;
}

export class PayloadCipher {
  private constructor(
    private readonly sealing: ImportedKey,
    private readonly opening: ReadonlyMap<string, AesGcmKey>,
  ) {}

  /**
   * `secrets`: the deployment's secrets as 64 hex characters each, newest first; the first
   * seals, every one opens.
   */
  static async fromSecrets(
    secrets: readonly string[],
    aesGcm: AesGcm = webAesGcm,
  ): Promise<PayloadCipher> {
    return PayloadCipher.fromKeys(await derivePayloadKeys(secrets), aesGcm);
  }

  /** `keys` newest first, as derivePayloadKeys gives them: the first seals, every one opens. */
  static async fromKeys(
    keys: readonly PayloadKey[],
    aesGcm: AesGcm = webAesGcm,
  ): Promise<PayloadCipher> {
    const imported = await Promise.all(
      keys.map(async ({ id, key }) => ({ id, key: await aesGcm(key) })),
    );
    const [sealing] = imported;
    if (!sealing) throw new Error("the payload codec needs at least one key");
    return new PayloadCipher(sealing, new Map(imported.map(({ id, key }) => [id, key])));
  }

  /** The id of the key that seals: operators see it in each payload's metadata. */
  get keyId(): string {
    return this.sealing.id;
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(payloads.map((payload) => this.seal(payload, false)));
  }

  /** Seals as an operator's (the codec endpoint's encode): readable, never a worker's input. */
  async encodeForOperator(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(payloads.map((payload) => this.seal(payload, true)));
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return Promise.all(payloads.map((payload) => this.open(payload)));
  }

  private async seal(payload: Payload, operator: boolean): Promise<Payload> {
    const plain = toBinary(
      SealedPayloadSchema,
      create(SealedPayloadSchema, {
        metadata: payload.metadata ?? {},
        data: payload.data ?? new Uint8Array(),
      }),
    );
    const iv = crypto.getRandomValues(new Uint8Array(IV_BYTES));
    const sealed = await this.sealing.key.seal(iv, plain, context(this.sealing.id, operator));
    const data = new Uint8Array(IV_BYTES + sealed.byteLength);
    data.set(iv);
    data.set(sealed, IV_BYTES);
    return {
      metadata: {
        encoding: utf8.encode(SEALED_ENCODING),
        [KEY_ID_METADATA]: utf8.encode(this.sealing.id),
        ...(operator && { [OPERATOR_METADATA]: utf8.encode("1") }),
      },
      data,
    };
  }

  private async open(payload: Payload): Promise<Payload> {
    const encoding = payload.metadata?.encoding;
    if (!encoding || fromUtf8.decode(encoding) !== SEALED_ENCODING) return payload;
    const idBytes = payload.metadata?.[KEY_ID_METADATA];
    const id = idBytes ? fromUtf8.decode(idBytes) : "";
    const key = this.opening.get(id);
    // A key the deployment no longer has: the payload stays sealed for good, so say which.
    if (!key) throw new UnknownPayloadKey(id);
    const data = payload.data ?? new Uint8Array();
    const plain = await key.open(
      data.subarray(0, IV_BYTES),
      data.subarray(IV_BYTES),
      context(id, isOperators(payload)),
    );
    const opened = fromBinary(SealedPayloadSchema, plain);
    return { metadata: opened.metadata, data: opened.data };
  }
}

/** What a seal is bound to besides its bytes: its key's id, and whether an operator sealed it. */
const context = (keyId: string, operator: boolean) =>
  utf8.encode(operator ? `${keyId}:operator` : keyId);

const isOperators = (payload: Payload) => payload.metadata?.[OPERATOR_METADATA] !== undefined;

/** A payload in clear where only sealed ones are taken: a worker's refusal (`sealedOnly`). */
export class UnsealedPayload extends Error {
  constructor() {
    super("a payload not sealed by Relay with this deployment's keys is refused");
  }
}

/**
 * The one payload Temporal's server writes itself: the details of an activity cancelled before it
 * started (in a retry's backoff too), the JSON string "ACTIVITY_ID_NOT_STARTED". No workflow acts
 * on it; refused, it failed the workflow task of every request cancelled between retries, for good.
 */
const SERVERS_NOTE = '"ACTIVITY_ID_NOT_STARTED"';

function isServersNote({ metadata, data }: Payload): boolean {
  const names = Object.keys(metadata ?? {});
  return (
    names.length === 1 &&
    metadata?.encoding !== undefined &&
    fromUtf8.decode(metadata.encoding) === "json/plain" &&
    fromUtf8.decode(data ?? new Uint8Array()) === SERVERS_NOTE
  );
}

/**
 * `cipher` as a codec that opens sealed payloads only (and the server's note above): one in clear, or one an operator sealed
 * through the codec endpoint, is refused, so whoever can write to Temporal without the
 * deployment's keys cannot have a worker act on an input of their own (a delivery signed with a
 * project's secret). A deployment with histories from before the codec takes them until they
 * drain (the worker's RELAY_UNSEALED_PAYLOADS=accept).
 */
export function sealedOnly(cipher: PayloadCipher): Pick<PayloadCipher, "encode" | "decode"> {
  return {
    encode: (payloads) => cipher.encode(payloads),
    decode: (payloads) => {
      const sealed = (p: Payload) =>
        p.metadata?.encoding &&
        fromUtf8.decode(p.metadata.encoding) === SEALED_ENCODING &&
        !isOperators(p);
      if (!payloads.every((p) => sealed(p) || isServersNote(p))) {
        return Promise.reject(new UnsealedPayload());
      }
      return cipher.decode(payloads);
    },
  };
}

/** The codec's keys from the deployment's secrets, in their order (newest first). */
export const derivePayloadKeys = (secrets: readonly string[]): Promise<PayloadKey[]> =>
  Promise.all(secrets.map(derivePayloadKey));
/** A payload sealed with a key this deployment does not have: the codec endpoint's 422. */
export class UnknownPayloadKey extends Error {
  constructor(readonly keyId: string) {
    super(`no payload key with id '${keyId}' is configured`);
  }
}

/**
 * The codec's AES-256 key from a deployment secret (HKDF-SHA-256), and its id: the first 8
 * bytes of the key's SHA-256, which names the key without telling anything of it.
 */
/** 32 bytes for one use (`info`) from a deployment secret of 64 hex characters (HKDF-SHA-256). */
export async function deriveFromSecret(
  secretHex: string,
  info: Uint8Array<ArrayBuffer>,
): Promise<Uint8Array<ArrayBuffer>> {
  if (!/^[0-9a-f]{64}$/i.test(secretHex)) {
    throw new Error("a payload secret must be 64 hex characters");
  }
  const secret = new Uint8Array(
    secretHex.match(/../g)?.map((byte) => Number.parseInt(byte, 16)) ?? [],
  );
  const material = await crypto.subtle.importKey("raw", secret, "HKDF", false, ["deriveBits"]);
  const bits = await crypto.subtle.deriveBits(
    { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(), info },
    material,
    256,
  );
  return new Uint8Array(bits);
}

async function derivePayloadKey(secretHex: string): Promise<PayloadKey> {
  const raw = await deriveFromSecret(secretHex, KEY_INFO);
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", raw));
  const id = [...digest.subarray(0, 8)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  return { id, key: raw };
}

/** A JSON value as Temporal's default converter writes it (`json/plain`). */
export function jsonPayload(value: unknown): Payload {
  return {
    metadata: { encoding: utf8.encode("json/plain") },
    data: utf8.encode(JSON.stringify(value)),
  };
}

/** The value of a `json/plain` payload; anything else is undefined. */
export function jsonPayloadValue(payload: Payload | undefined): unknown {
  const encoding = payload?.metadata?.encoding;
  if (!payload?.data || !encoding || fromUtf8.decode(encoding) !== "json/plain") return undefined;
  return JSON.parse(fromUtf8.decode(payload.data));
}

/** A payload in protobuf's JSON form, as Temporal's HTTP API and codec endpoints carry it. */
export interface PayloadJson {
  metadata?: Record<string, string>;
  data?: string;
}

export function payloadToJson(payload: Payload): PayloadJson {
  return {
    metadata: Object.fromEntries(
      Object.entries(payload.metadata ?? {}).map(([name, value]) => [name, toBase64(value)]),
    ),
    data: toBase64(payload.data ?? new Uint8Array()),
  };
}

/** Throws on what is not base64: callers of the codec endpoint get 400 for it. */
export function payloadFromJson(json: PayloadJson): Payload {
  return {
    metadata: Object.fromEntries(
      Object.entries(json.metadata ?? {}).map(([name, value]) => [name, fromBase64(value)]),
    ),
    data: fromBase64(json.data ?? ""),
  };
}

function fromBase64(text: string): Uint8Array {
  // protobuf's JSON accepts either alphabet, padded or not.
  const binary = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}
