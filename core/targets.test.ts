import { describe, expect, test } from "vitest";
import { parseIp } from "./ip.ts";
import { ownListeners } from "./listeners.ts";
import { deliveryAddressProblem, nonPublicKind, targetUrlProblem } from "./targets.ts";

const production = { allowPrivate: false, relayDomain: "relay.example.com" };
const devStack = { allowPrivate: true, relayDomain: "localhost:8787" };

function kind(address: string) {
  const ip = parseIp(address);
  if (!ip) throw new Error(`bad test input ${address}`);
  return nonPublicKind(ip);
}

describe("which addresses are not public", () => {
  test.each([
    ["127.0.0.1", "loopback"],
    ["127.255.0.9", "loopback"],
    ["10.1.2.3", "private"],
    ["172.16.0.1", "private"],
    ["172.31.255.255", "private"],
    ["192.168.1.1", "private"],
    ["100.64.0.1", "private (shared address space)"],
    ["169.254.169.254", "link-local"],
    ["0.0.0.0", "unspecified"],
    ["224.0.0.1", "multicast"],
    ["255.255.255.255", "reserved"],
    ["::1", "loopback"],
    ["::", "unspecified"],
    ["::a00:1", "reserved"],
    ["fd00::1", "private"],
    ["fe80::1", "link-local"],
    ["ff02::1", "multicast"],
    ["::ffff:127.0.0.1", "loopback"],
    ["64:ff9b::a00:1", "private"],
    ["2002:7f00:1::", "loopback"],
    ["::ffff:0:7f00:1", "loopback"],
    ["::ffff:0:10.1.2.3", "private"],
    ["64:ff9b:1::808:808", "local-use NAT64"],
    ["64:ff9b:1:ffff::1", "local-use NAT64"],
    ["2001:0:4136:e378:8000:63bf:80ff:fffe", "loopback"],
    ["2001:0:a00:1:8000:63bf:f7f7:f7f7", "private"],
    ["fec0::1", "site-local"],
    ["feff:ffff::1", "site-local"],
  ])("%s is %s", (address, expected) => {
    expect(kind(address)).toBe(expected);
  });

  test.each([
    "8.8.8.8",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700::1111",
    "64:ff9b::808:808",
    "::ffff:0:808:808",
    "2001:0:4136:e378:8000:63bf:f7f7:f7f7",
    "2001:db8::1",
  ])("%s is public", (address) => {
    expect(kind(address)).toBeNull();
  });
});

describe("saving a target URL", () => {
  test.each([
    ["ftp://example.com/x", "must be an http or https URL"],
    ["not a url", "must be an http or https URL"],
    ["https://user:pw@example.com/", "may not carry credentials; use the target's headers"],
    ["https://relay.example.com/v1/x", "points at the relay itself"],
    ["https://acme.relay.example.com/v1/x", "points at the relay itself"],
    ["https://ACME.Relay.Example.com./v1/x", "points at the relay itself"],
    ["http://localhost:3000/hook", "points at a loopback address"],
    ["http://api.localhost/hook", "points at a loopback address"],
    ["http://127.0.0.1:9000/", "may not point here: 127.0.0.1 is a loopback address"],
    ["http://[::1]/", "may not point here: ::1 is a loopback address"],
    [
      "http://169.254.169.254/latest/meta-data",
      "may not point here: 169.254.169.254 is a link-local address",
    ],
    ["http://10.0.0.5/", "may not point here: 10.0.0.5 is a private address"],
  ])("%s is refused: %s", (url, problem) => {
    expect(targetUrlProblem(url, production)).toBe(problem);
  });

  test.each([
    "https://billing.example.com/hook",
    "http://203.0.113.9:8080/x",
    "https://relay.example.com.evil.test/",
    "https://notrelay.example.com/",
  ])("%s is accepted", (url) => {
    expect(targetUrlProblem(url, production)).toBeNull();
  });

  test("a dev stack allows loopback targets but never the relay's own host and port", () => {
    expect(targetUrlProblem("http://127.0.0.1:9000/hook", devStack)).toBeNull();
    expect(targetUrlProblem("http://localhost:3000/hook", devStack)).toBeNull();
    expect(targetUrlProblem("http://demo.localhost:8787/v1/echo", devStack)).toBe(
      "points at the relay itself",
    );
  });
});

describe("checking a target again at delivery", () => {
  const resolvesTo =
    (...addresses: string[]) =>
    async () =>
      addresses;

  test("a name that now resolves to a private address is refused", async () => {
    const problem = await deliveryAddressProblem(
      "https://hooks.example.com/x",
      production,
      resolvesTo("93.184.216.34", "10.0.0.7"),
    );
    expect(problem).toBe("target hooks.example.com refused: 10.0.0.7 is a private address");
  });

  test("a name with only public answers goes ahead", async () => {
    const problem = await deliveryAddressProblem(
      "https://hooks.example.com/x",
      production,
      resolvesTo("93.184.216.34", "2606:2800:220:1::1"),
    );
    expect(problem).toBeNull();
  });

  test("an IP literal is checked without resolving", async () => {
    const problem = await deliveryAddressProblem(
      "http://[fe80::1]:8080/x",
      production,
      async () => {
        throw new Error("must not resolve a literal");
      },
    );
    expect(problem).toBe("target [fe80::1] refused: fe80::1 is a link-local address");
  });

  test("a name that does not resolve is left to the delivery to fail as unreachable", async () => {
    const problem = await deliveryAddressProblem("https://gone.example/x", production, async () => {
      throw new Error("ENOTFOUND");
    });
    expect(problem).toBeNull();
  });

  test("the edge's own listener is refused even where private targets are allowed; its neighbours are not", async () => {
    const rules = {
      allowPrivate: true,
      ownListeners: ownListeners([{ address: "127.0.0.1", port: 8787 }], []),
    };
    const resolvesToLoopback = resolvesTo("127.0.0.1");
    expect(
      await deliveryAddressProblem("http://edge.test:8787/v1/x", rules, resolvesToLoopback),
    ).toBe("target edge.test refused: 127.0.0.1 port 8787 is Relay's own edge");
    expect(
      await deliveryAddressProblem("http://[::ffff:127.0.0.1]:8787/", rules, resolvesToLoopback),
    ).toMatch(/Relay's own edge$/);
    expect(
      await deliveryAddressProblem("http://edge.test:8788/", rules, resolvesToLoopback),
    ).toBeNull();
    expect(
      await deliveryAddressProblem("http://127.0.0.2:8787/", rules, resolvesToLoopback),
    ).toBeNull();
  });

  test("a dev stack resolves nothing and refuses nothing", async () => {
    const problem = await deliveryAddressProblem("http://127.0.0.1:1/x", devStack, async () => {
      throw new Error("must not resolve");
    });
    expect(problem).toBeNull();
  });
});
