import { expect, test } from "vitest";
import { defaultProjectLimits, effectiveLimits, requireRoom } from "./limits.ts";

test("an override replaces its cap's default; null or absent keeps the default", () => {
  const limits = effectiveLimits(defaultProjectLimits, { endpoints: 5, keys: null });
  expect(limits).toEqual({ ...defaultProjectLimits, endpoints: 5 });
});

test("a write past the cap is limit_exceeded, naming the cap and its value", () => {
  expect(() => requireRoom("endpoints", 3, 2, 1)).not.toThrow();
  expect(() => requireRoom("endpoints", 3, 3, 1)).toThrow(
    expect.objectContaining({
      code: "limit_exceeded",
      status: 409,
      message: expect.stringMatching(/cap of 3 endpoints per project/),
    }),
  );
});

test("a write that grows nothing passes even over a cap lowered after the fact", () => {
  expect(() => requireRoom("schemaBytes", 100, 500, 0)).not.toThrow();
  expect(() => requireRoom("schemaBytes", 100, 500, -50)).not.toThrow();
  expect(() => requireRoom("schemaBytes", 100, 500, 1)).toThrow(/cap of 100 schema bytes/);
});
