import { expect, test } from "vitest";
import {
  admittedInOrder,
  defaultWaitingCaps,
  heldPlaces,
  roomFor,
  waitingCap,
  waitingCapMessage,
} from "./waiting.ts";

test("a project's cap is its own when an operator set one, else its plan's", () => {
  expect(waitingCap("free", defaultWaitingCaps, null)).toBe(10_000);
  expect(waitingCap("paid", defaultWaitingCaps, null)).toBe(100_000);
  expect(waitingCap("paid", { free: 5, paid: 50 }, null)).toBe(50);
  expect(waitingCap("free", defaultWaitingCaps, 3)).toBe(3);
  expect(waitingCap("free", defaultWaitingCaps, 0)).toBe(0);
});

test("a waiting delivery fits while fewer than the cap wait; the refusal names the cap", () => {
  expect(roomFor(2, 3)).toBe(true);
  expect(roomFor(3, 3)).toBe(false);
  expect(roomFor(0, 0)).toBe(false);
  expect(roomFor(1, 3, 2)).toBe(true);
  expect(roomFor(2, 3, 2)).toBe(false);
  expect(waitingCapMessage(3)).toMatch(/cap of 3 scheduled and held deliveries/);
});

test("calls take places in order while the cap allows; a repeat keeps its own and takes none", () => {
  expect(admittedInOrder(1, 3, [false, false, false])).toEqual([true, true, false]);
  expect(admittedInOrder(3, 3, [false, true, false])).toEqual([false, true, false]);
  expect(admittedInOrder(1, 3, [true, false, false, false])).toEqual([true, true, true, false]);
  expect(admittedInOrder(0, 0, [false])).toEqual([false]);
});

test("a call takes a place for each async target held now, none for others", () => {
  const targets = [
    { id: "a", deliveryMode: "async" },
    { id: "b", deliveryMode: "async" },
    { id: "s", deliveryMode: "sync" },
  ];
  expect(heldPlaces(targets, new Set())).toEqual([]);
  expect(heldPlaces(targets, new Set(["b", "s", "elsewhere"]))).toEqual(["b"]);
  expect(heldPlaces(targets, new Set(["a", "b"]))).toEqual(["a", "b"]);
});
