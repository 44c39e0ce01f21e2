/** The ports stacks and Temporal's server are given: below the ephemeral range, never twice. */
import { expect, test } from "vitest";
import { freeLowPorts } from "./ports.ts";

test("low ports are below Linux's ephemeral range, and one process never gets the same one twice, bound or not", async () => {
  // Unbound, as a stack's ports are until its processes start: a random pick would repeat.
  const first = await freeLowPorts(2_000);
  const second = await freeLowPorts(2_000);
  expect(first.every((port) => port >= 10_000 && port < 32_768)).toBe(true);
  expect(new Set([...first, ...second]).size).toBe(4_000);
});
