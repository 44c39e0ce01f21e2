/** IPv4 and IPv6 addresses and CIDR ranges as big integers, for endpoint allowlists. */

export interface Cidr {
  version: 4 | 6;
  network: bigint;
  prefix: number;
}

function parseIpv4(text: string): bigint | null {
  const parts = text.split(".");
  if (parts.length !== 4) return null;
  let value = 0n;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return null;
    value = (value << 8n) | BigInt(part);
  }
  return value;
}

function parseIpv6(text: string): bigint | null {
  // An embedded IPv4 tail (::ffff:1.2.3.4) becomes two hextets.
  const lastColon = text.lastIndexOf(":");
  let body = text;
  if (text.includes(".", lastColon)) {
    const v4 = parseIpv4(text.slice(lastColon + 1));
    if (v4 === null) return null;
    body = `${text.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = body.split("::");
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(":") : [];
  const tail = halves.length === 2 && halves[1] ? halves[1].split(":") : [];
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null;
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill("0"), ...tail];
  let value = 0n;
  for (const group of groups) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return null;
    value = (value << 16n) | BigInt(Number.parseInt(group, 16));
  }
  return value;
}

export function parseIp(text: string): { version: 4 | 6; value: bigint } | null {
  const v4 = parseIpv4(text);
  if (v4 !== null) return { version: 4, value: v4 };
  const v6 = text.includes(":") ? parseIpv6(text.replace(/^\[|\]$/g, "")) : null;
  if (v6 === null) return null;
  // IPv4-mapped IPv6 (::ffff:a.b.c.d) is the IPv4 address, as Node reports dual-stack peers.
  if (v6 >> 32n === 0xffffn) return { version: 4, value: v6 & 0xffffffffn };
  return { version: 6, value: v6 };
}

/**
 * The IPv4 addresses an IPv6 address carries inside, which are what a connection to it reaches
 * through a translator or tunnel: NAT64's well-known prefix (`64:ff9b::/96`, RFC 6052), SIIT's
 * IPv4-translated form (`::ffff:0:a.b.c.d`, RFC 2765), 6to4 (`2002::/16`, RFC 3056) and Teredo
 * (`2001::/32`, RFC 4380: its server's, and its client's, stored inverted). IPv4-mapped forms
 * (`::ffff:a.b.c.d`) never get here: `parseIp` reads them as IPv4.
 */
export function embeddedIpv4(address: { version: 4 | 6; value: bigint }): bigint[] {
  if (address.version === 4) return [];
  const { value } = address;
  const low32 = value & 0xffffffffn;
  if (value >> 32n === 0x0064ff9b0000000000000000n) return [low32];
  if (value >> 32n === 0xffff0000n) return [low32];
  if (value >> 112n === 0x2002n) return [(value >> 80n) & 0xffffffffn];
  if (value >> 96n === 0x20010000n) return [(value >> 64n) & 0xffffffffn, low32 ^ 0xffffffffn];
  return [];
}

export function parseCidr(text: string): Cidr | null {
  const [address, prefixText, ...rest] = text.trim().split("/");
  if (address === undefined || rest.length > 0) return null;
  const ip = parseIp(address);
  if (!ip) return null;
  const bits = ip.version === 4 ? 32 : 128;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  if (!Number.isInteger(prefix) || prefix < 0 || prefix > bits || prefixText === "") return null;
  return { version: ip.version, network: ip.value >> BigInt(bits - prefix), prefix };
}

export function cidrContains(cidr: Cidr, ip: { version: 4 | 6; value: bigint }): boolean {
  if (cidr.version !== ip.version) return false;
  const bits = ip.version === 4 ? 32 : 128;
  return ip.value >> BigInt(bits - cidr.prefix) === cidr.network;
}

/**
 * The caller's address: the socket's peer, unless that peer is a trusted proxy, in which case
 * the rightmost X-Forwarded-For entry that is not itself a trusted proxy. Anything unparsable
 * yields null, which no allowlist admits.
 */
export function clientAddress(
  remoteAddress: string,
  forwardedFor: string | null,
  trustedProxies: Cidr[],
): { version: 4 | 6; value: bigint } | null {
  const peer = parseIp(remoteAddress);
  const trusted = (ip: { version: 4 | 6; value: bigint }) =>
    trustedProxies.some((cidr) => cidrContains(cidr, ip));
  if (!peer || !trusted(peer) || !forwardedFor) return peer;
  const hops = forwardedFor.split(",").map((hop) => parseIp(hop.trim()));
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i];
    if (!hop) return null;
    if (!trusted(hop)) return hop;
  }
  return peer;
}
