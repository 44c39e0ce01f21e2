import { expect, test } from "vitest";
import { BASE64, bodyBytes, hexPreview, loggedBody } from "./inspect.ts";

test("a body is text when it is valid UTF-8, else base64, with its size either way", () => {
  const text = new TextEncoder().encode('{"name":"Zoë"}');
  expect(loggedBody(text)).toEqual({ encoding: "utf8", text: '{"name":"Zoë"}', bytes: 15 });
  const binary = new Uint8Array([0xff, 0x00, 0x41]);
  expect(loggedBody(binary)).toEqual({ encoding: "base64", text: "/wBB", bytes: 3 });
  expect(loggedBody(new Uint8Array())).toEqual({ encoding: "utf8", text: "", bytes: 0 });
  // A byte-order mark is part of the body: kept, not eaten by the decoder.
  expect(loggedBody(new Uint8Array([0xef, 0xbb, 0xbf, 0x61])).text).toBe("\ufeffa");
});

test("a body taken as text or base64 is the bytes it names", () => {
  expect([...bodyBytes({ encoding: "base64", text: "/wBB" })]).toEqual([0xff, 0x00, 0x41]);
  expect(new TextDecoder().decode(bodyBytes({ encoding: "utf8", text: "Zoë" }))).toBe("Zoë");
  expect(["", "/wBB", "QQ==", "QUI="].every((t) => BASE64.test(t))).toBe(true);
  expect(["Q", "QQ=", "Q===", "QU I=", "QQ==QQ=="].some((t) => BASE64.test(t))).toBe(false);
});

test("a hex preview shows 16 bytes a line, with their printable characters, up to its limit", () => {
  const bytes = new Uint8Array(40).map((_, i) => i + 60);
  expect(hexPreview(bytes, 20).split("\n")).toEqual([
    "00000000  3c 3d 3e 3f 40 41 42 43 44 45 46 47 48 49 4a 4b  <=>?@ABCDEFGHIJK",
    "00000010  4c 4d 4e 4f                                      LMNO",
  ]);
  expect(hexPreview(new Uint8Array([0, 0x7f]))).toBe(`00000000  00 7f${" ".repeat(42)}  ..`);
});
