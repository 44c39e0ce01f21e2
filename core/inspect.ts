/**
 * A body as the request log shows it (issue 28, inspectable requests): its text when it is
 * valid UTF-8, else its bytes in base64, with its size. The API answers bodies so and takes an
 * edited one ("send again") so; the panel decodes it for its hex preview.
 */
import { fromBase64, toBase64 } from "./base64.ts";

/** In the order of the proto enum BodyEncoding (the Connect converters map by position). */
export const bodyEncodings = ["utf8", "base64"] as const;
export type BodyEncoding = (typeof bodyEncodings)[number];

export interface LoggedBody {
  encoding: BodyEncoding;
  text: string;
  /** The body's size in bytes. */
  bytes: number;
}

/** A body as the log shows it: text when its bytes are valid UTF-8, else base64. */
export function loggedBody(bytes: Uint8Array): LoggedBody {
  try {
    const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes);
    return { encoding: "utf8", text, bytes: bytes.byteLength };
  } catch {
    return { encoding: "base64", text: toBase64(bytes), bytes: bytes.byteLength };
  }
}

/** Standard base64, padded: what `encoding: "base64"` takes. */
export const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A body's bytes from its text (`BASE64` checked first for base64). */
export function bodyBytes({ encoding, text }: Pick<LoggedBody, "encoding" | "text">): Uint8Array {
  return encoding === "utf8" ? new TextEncoder().encode(text) : fromBase64(text);
}

/**
 * The first `max` bytes as a hex dump, 16 a line: offset, bytes in hex, and the printable ASCII
 * among them (a dot for the rest), as `xxd` shows them.
 */
export function hexPreview(bytes: Uint8Array, max = 256): string {
  const lines: string[] = [];
  for (let at = 0; at < Math.min(bytes.length, max); at += 16) {
    const row = [...bytes.subarray(at, Math.min(at + 16, max))];
    const hex = row.map((b) => b.toString(16).padStart(2, "0")).join(" ");
    const text = row.map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${at.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${text}`);
  }
  return lines.join("\n");
}
