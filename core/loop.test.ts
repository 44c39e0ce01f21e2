import { expect, test } from "vitest";
import { loopMark, markedCdnLoop, passesThrough } from "./loop.ts";

const mark = loopMark("Relay.Example.com");

test("the mark is the edge domain, in lower case", () => {
  expect(mark).toBe("relay.example.com");
  expect(loopMark("localhost:8787")).toBe("localhost:8787");
});

test("CDN-Loop is read as a comma list whose members may carry parameters", () => {
  expect(passesThrough("", mark)).toBe(0);
  expect(passesThrough("relay.example.com", mark)).toBe(1);
  expect(
    passesThrough('cdn-a, RELAY.example.com ; v=1,relay.example.com;x="y" , cdn-b', mark),
  ).toBe(2);
  // Another Relay's domain, or one under this one, is not this Relay.
  expect(passesThrough("relay.example.com:8443, acme.relay.example.com, relay.example", mark)).toBe(
    0,
  );
  // An unclosed quote hides nothing appended after it.
  expect(passesThrough('cdn-a; v="open, relay.example.com', mark)).toBe(1);
});

test("a delivery keeps the caller's CDN-Loop and appends the mark", () => {
  expect(markedCdnLoop(null, mark)).toBe("relay.example.com");
  expect(markedCdnLoop("  ", mark)).toBe("relay.example.com");
  expect(markedCdnLoop("cdn-a; v=1", mark)).toBe("cdn-a; v=1, relay.example.com");
  expect(passesThrough(markedCdnLoop(markedCdnLoop("cdn-a", mark), mark), mark)).toBe(2);
});
