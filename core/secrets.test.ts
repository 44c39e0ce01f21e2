import { expect, test } from "vitest";
import { newId } from "./secrets.ts";

test("ids are 16 random bytes, URL-safe, and none repeats across the generator's refills", () => {
  const ids = Array.from({ length: 1000 }, () => newId("req"));
  for (const id of ids) expect(id).toMatch(/^req_[A-Za-z0-9_-]{22}$/);
  expect(new Set(ids).size).toBe(ids.length);
});
