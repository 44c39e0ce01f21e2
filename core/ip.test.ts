import { describe, expect, test } from "vitest";
import { cidrContains, clientAddress, embeddedIpv4, parseCidr, parseIp } from "./ip.ts";

function allowed(cidr: string, ip: string): boolean {
  const range = parseCidr(cidr);
  const address = parseIp(ip);
  if (!range || !address) throw new Error(`bad test input ${cidr} ${ip}`);
  return cidrContains(range, address);
}

describe("CIDR allowlists", () => {
  test.each([
    ["10.0.0.0/8", "10.255.1.2", true],
    ["10.0.0.0/8", "11.0.0.1", false],
    ["192.168.1.7", "192.168.1.7", true],
    ["192.168.1.7/32", "192.168.1.8", false],
    ["0.0.0.0/0", "8.8.8.8", true],
    ["2001:db8::/32", "2001:db8:1::1", true],
    ["2001:db8::/32", "2001:db9::1", false],
    ["::1/128", "::1", true],
    ["127.0.0.0/8", "::ffff:127.0.0.1", true],
    ["10.0.0.0/8", "::1", false],
  ])("%s contains %s: %s", (cidr, ip, expected) => {
    expect(allowed(cidr, ip)).toBe(expected);
  });

  test.each(["10.0.0.0/33", "1.2.3", "256.1.1.1", "2001:db8::/129", "::1::2", "10.0.0.0/", "x"])(
    "%s is not a CIDR",
    (text) => {
      expect(parseCidr(text)).toBeNull();
    },
  );
});

describe("clientAddress", () => {
  const proxies = [parseCidr("10.0.0.0/8")].filter((c) => c !== null);
  const address = (remote: string, xff: string | null) => {
    const ip = clientAddress(remote, xff, proxies);
    return ip ? ip.value : null;
  };
  test("X-Forwarded-For counts only when the peer is a trusted proxy", () => {
    expect(address("203.0.113.9", "198.51.100.1")).toBe(parseIp("203.0.113.9")?.value);
    expect(address("10.0.0.2", "198.51.100.1")).toBe(parseIp("198.51.100.1")?.value);
  });
  test("the rightmost untrusted hop wins, so a caller cannot forge an earlier one", () => {
    expect(address("10.0.0.2", "1.1.1.1, 198.51.100.1, 10.0.0.3")).toBe(
      parseIp("198.51.100.1")?.value,
    );
  });
  test("garbage in X-Forwarded-For from a trusted proxy admits nothing", () => {
    expect(address("10.0.0.2", "not-an-ip")).toBeNull();
  });
});

describe("the IPv4 address an IPv6 form carries inside", () => {
  const inside = (text: string) => {
    const ip = parseIp(text);
    if (!ip) throw new Error(`bad test input ${text}`);
    return embeddedIpv4(ip).map((value) =>
      [24n, 16n, 8n, 0n].map((s) => (value >> s) & 255n).join("."),
    );
  };
  test.each([
    ["64:ff9b::7f00:1", ["127.0.0.1"]],
    ["::ffff:0:a00:1", ["10.0.0.1"]],
    ["::ffff:0:169.254.169.254", ["169.254.169.254"]],
    ["2002:c0a8:101::1", ["192.168.1.1"]],
    // Teredo: the server 65.54.227.120, the client 127.0.0.1 stored inverted.
    ["2001:0:4136:e378:8000:63bf:80ff:fffe", ["65.54.227.120", "127.0.0.1"]],
    ["2606:4700::1111", []],
    ["10.0.0.1", []],
  ])("%s carries %j", (address, expected) => {
    expect(inside(address)).toEqual(expected);
  });

  test("an IPv4-mapped address is read as the IPv4 address itself", () => {
    expect(parseIp("::ffff:7f00:1")).toEqual({ version: 4, value: 0x7f000001n });
  });
});
