/**
 * Reading a request's body on the Node listener, capped and never decompressed: the REST routes
 * and the codec endpoint (control/codec.ts) both read theirs this way.
 */
import { Readable } from "node:stream";
import { RelayError } from "../../core/errors.ts";
import { readCapped, TOO_LARGE } from "../../core/read-capped.ts";
import type { Req } from "../panel.ts";

/**
 * The body as JSON, at most `maxBytes` of it (`readText`). No body at all is `{}`; blanks are
 * not JSON, so they are refused like any other text that is not.
 */
export async function readJson(req: Req, maxBytes: number): Promise<unknown> {
  const text = await readText(req, maxBytes);
  if (text === "") return {};
  try {
    return JSON.parse(text);
  } catch {
    throw new RelayError("bad_request", "body is not valid JSON");
  }
}

/**
 * The body as text, at most `maxBytes` of it. Bodies are never decompressed: a compressed one is
 * refused before it is read, as is one whose announced length is over the limit.
 */
export async function readText(req: Req, maxBytes: number): Promise<string> {
  const encoding = req.headers["content-encoding"];
  if (encoding !== undefined && encoding.toLowerCase() !== "identity") {
    throw new RelayError("unsupported_media_type", "send the body uncompressed");
  }
  const tooLarge = () => new RelayError("payload_too_large", `body over ${maxBytes} bytes`);
  if (Number(req.headers["content-length"] ?? 0) > maxBytes) throw tooLarge();
  const read = await readCapped(Readable.toWeb(req) as ReadableStream<Uint8Array>, maxBytes);
  if (read === TOO_LARGE) throw tooLarge();
  return Buffer.from(read.buffer, read.byteOffset, read.byteLength).toString("utf8");
}
