/**
 * Operators' sessions on the codec endpoint. The Temporal UI calls the endpoint from the
 * browser, which sends a cookie but not the operator's token, so an operator trades the token
 * for a session once. A session is its expiry and the HMAC-SHA-256 of it under a key derived
 * from the deployment's secret and the operators' tokens: no token travels in it, a new admin
 * or operator token ends every session at once, and only a session signed out before its
 * expiry is kept server-side (store/codec-sessions.ts). Web Crypto only;
 * time is the caller's.
 */
import { base64url, timingSafeEqual } from "./secrets.ts";

/** How long a session lasts: a working day. */
export const SESSION_SECONDS = 12 * 3600;

/** v2: each session has a nonce of its own, so one signed out never ends another (v1 had none). */
const VERSION = "v2";
const KEY_INFO = new TextEncoder().encode("relay codec operator session v1");
const utf8 = new TextEncoder();

export interface Session {
  /** The cookie's value: `v2.{expiry in Unix seconds}.{nonce}.{HMAC, base64url}`. */
  value: string;
  expiresAt: Date;
}

export class OperatorSessions {
  private constructor(private readonly key: CryptoKey) {}

  /**
   * `deploymentSecret`: RELAY_ENCRYPTION_KEY; `operatorTokens`: every token that may open a
   * session (the admin's, the operator's), which the key depends on.
   */
  static async fromSecrets(
    deploymentSecret: string,
    operatorTokens: readonly string[],
  ): Promise<OperatorSessions> {
    const material = await crypto.subtle.importKey(
      "raw",
      utf8.encode(deploymentSecret),
      "HKDF",
      false,
      ["deriveKey"],
    );
    const salt = await crypto.subtle.digest("SHA-256", utf8.encode(operatorTokens.join("\n")));
    const key = await crypto.subtle.deriveKey(
      { name: "HKDF", hash: "SHA-256", salt, info: KEY_INFO },
      material,
      { name: "HMAC", hash: "SHA-256", length: 256 },
      false,
      ["sign"],
    );
    return new OperatorSessions(key);
  }

  async issue(now: Date): Promise<Session> {
    const expiry = Math.floor(now.getTime() / 1000) + SESSION_SECONDS;
    const nonce = base64url(crypto.getRandomValues(new Uint8Array(16)));
    const signed = `${VERSION}.${expiry}.${nonce}`;
    return {
      value: `${signed}.${base64url(await this.mac(signed))}`,
      expiresAt: new Date(expiry * 1000),
    };
  }

  /** When `value`, a session this deployment issued, expires; null if it is none or is over. */
  async expiresAt(value: string, now: Date): Promise<Date | null> {
    const match = /^v2\.(\d{1,12})\.([A-Za-z0-9_-]{22})\.([A-Za-z0-9_-]{43})$/.exec(value);
    if (!match?.[1] || !match[2] || !match[3]) return null;
    const [, expiry, nonce, mac] = match;
    const expiresAt = new Date(Number(expiry) * 1000);
    if (expiresAt <= now) return null;
    const expected = base64url(await this.mac(`${VERSION}.${expiry}.${nonce}`));
    return timingSafeEqual(utf8.encode(mac), utf8.encode(expected)) ? expiresAt : null;
  }

  private async mac(text: string): Promise<Uint8Array> {
    return new Uint8Array(await crypto.subtle.sign("HMAC", this.key, utf8.encode(text)));
  }
}
