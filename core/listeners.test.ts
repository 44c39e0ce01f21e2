import { expect, test } from "vitest";
import { listenerProblem, ownListeners, parseListeners } from "./listeners.ts";

test("listeners are host:port pairs; a wildcard or a name stands for the whole machine", () => {
  expect(parseListeners("127.0.0.1:8787, [::1]:8787,0.0.0.0:80,[::]:81,localhost:82,")).toEqual([
    { address: "127.0.0.1", port: 8787 },
    { address: "::1", port: 8787 },
    { address: null, port: 80 },
    { address: null, port: 81 },
    { address: null, port: 82 },
  ]);
  expect(parseListeners("")).toEqual([]);
  for (const bad of [
    "127.0.0.1",
    "127.0.0.1:0",
    "127.0.0.1:99999",
    "::1:8787",
    "[nope]:1",
    ":80",
  ]) {
    expect(parseListeners(bad), bad).toBeNull();
  }
});

test("a connection reaches a listener at its port by one of its addresses", () => {
  const listeners = ownListeners(parseListeners("10.0.0.5:8787,0.0.0.0:9000") ?? [], [
    "192.168.1.20",
    "fe80::1",
  ]);
  const own = (address: string, port: number) => listenerProblem(address, port, listeners);
  expect(own("10.0.0.5", 8787)).toBe("10.0.0.5 port 8787 is Relay's own edge");
  expect(own("::ffff:10.0.0.5", 8787)).not.toBeNull();
  expect(own("10.0.0.6", 8787)).toBeNull();
  expect(own("10.0.0.5", 8788)).toBeNull();
  // The whole machine: loopback, its interfaces, and the unspecified address that connects home.
  for (const address of [
    "127.0.0.1",
    "127.9.9.9",
    "::1",
    "192.168.1.20",
    "fe80::1",
    "0.0.0.0",
    "::",
  ]) {
    expect(own(address, 9000), address).not.toBeNull();
  }
  expect(own("192.168.1.21", 9000)).toBeNull();
  expect(own("127.0.0.1", 8787)).toBeNull();
});
