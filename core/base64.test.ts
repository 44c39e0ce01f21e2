import { describe, expect, test } from "vitest";
import { fromBase64, toBase64 } from "./base64.ts";

describe("base64", () => {
  test("any bytes survive the trip, not only UTF-8", () => {
    const bytes = new Uint8Array([0xff, 0xfe, 0x00, 0x80, 0x41]);
    expect(fromBase64(toBase64(bytes))).toEqual(bytes);
    const large = Uint8Array.from({ length: 100_000 }, (_, i) => (i * 7) % 256);
    expect(fromBase64(toBase64(large))).toEqual(large);
  });
  test("is standard base64, padding included", () => {
    for (let length = 0; length < 7; length++) {
      const bytes = Uint8Array.from({ length }, (_, i) => 250 - i * 40);
      expect(toBase64(bytes)).toBe(btoa(String.fromCharCode(...bytes)));
      expect(fromBase64(toBase64(bytes))).toEqual(bytes);
    }
  });
});
