/**
 * Where a target may point. A relay that posts wherever it is told is a server-side request
 * forgery tool, so a target may not be the relay itself, nor (unless a dev stack allows it) an
 * address inside the relay's own network: private, loopback, link-local and the like. URLs are
 * checked when an endpoint is saved; the addresses a name resolves to are checked again right
 * before each delivery, since DNS answers change after the save.
 */
import { type Cidr, cidrContains, embeddedIpv4, parseCidr, parseIp } from "./ip.ts";
import { listenerProblem, type OwnListener } from "./listeners.ts";

export interface TargetRules {
  /** Dev stacks and tests deliver to loopback targets; production refuses them. */
  allowPrivate: boolean;
  /** The edge's own listeners (core/listeners.ts): refused even where private targets are not. */
  ownListeners?: OwnListener[];
}

export interface SavedTargetRules extends TargetRules {
  /** The relay's inbound domain (`host[:port]`); a target under it would call the relay. */
  relayDomain: string;
}

type Address = { version: 4 | 6; value: bigint };

const RANGES: [string, string][] = [
  ["0.0.0.0/8", "unspecified"],
  ["10.0.0.0/8", "private"],
  ["100.64.0.0/10", "private (shared address space)"],
  ["127.0.0.0/8", "loopback"],
  ["169.254.0.0/16", "link-local"],
  ["172.16.0.0/12", "private"],
  ["192.0.0.0/24", "reserved"],
  ["192.168.0.0/16", "private"],
  ["198.18.0.0/15", "reserved"],
  ["224.0.0.0/4", "multicast"],
  ["240.0.0.0/4", "reserved"],
  // The first match names the kind, so ::1 and :: come before the range holding them.
  ["::/128", "unspecified"],
  ["::1/128", "loopback"],
  ["::/96", "reserved"],
  // Local-use NAT64 (RFC 8215): where its prefix ends, and so which IPv4 address is inside, is
  // the local network's choice; any address in it reaches that network's translator.
  ["64:ff9b:1::/48", "local-use NAT64"],
  ["fc00::/7", "private"],
  ["fe80::/10", "link-local"],
  ["fec0::/10", "site-local"],
  ["ff00::/8", "multicast"],
];
const NON_PUBLIC = RANGES.map(([cidr, kind]) => ({ cidr: parseCidr(cidr) as Cidr, kind }));

/**
 * What kind of non-public address `address` is, or null when it is a public one. An IPv6 form
 * that carries an IPv4 address inside (`embeddedIpv4`) is the kind of that IPv4 address.
 */
export function nonPublicKind(address: Address): string | null {
  for (const value of embeddedIpv4(address)) {
    const kind = nonPublicKind({ version: 4, value });
    if (kind) return kind;
  }
  return NON_PUBLIC.find((range) => cidrContains(range.cidr, address))?.kind ?? null;
}

/** Why `address` (a DNS answer or an IP literal) may not be delivered to, or null. */
export function addressProblem(address: string, rules: TargetRules): string | null {
  if (rules.allowPrivate) return null;
  const ip = parseIp(address);
  if (!ip) return `${address} is not an IP address`;
  const kind = nonPublicKind(ip);
  return kind ? `${address} is a ${kind} address` : null;
}

/** A URL's or a socket's host as an IP address when it is a literal (`[::1]` or `::1`), else null. */
export function literalAddress(hostname: string): string | null {
  const bare = hostname.replace(/^\[|\]$/g, "");
  return parseIp(bare) ? bare : null;
}

/** The URL's port, made explicit, for comparing with a configured `host:port`. */
function portOf(url: URL): string {
  return url.port || (url.protocol === "https:" ? "443" : "80");
}

/** Whether `url` would reach the relay's own inbound domain (or a project under it). */
function isRelayItself(url: URL, relayDomain: string): boolean {
  const [domainHost = "", domainPort] = relayDomain.toLowerCase().split(":");
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  if (host !== domainHost && !host.endsWith(`.${domainHost}`)) return false;
  return domainPort === undefined || domainPort === portOf(url);
}

/** Why a target URL may not be saved, or null. Names are resolved and checked at delivery. */
/** A URL Relay posts to, at its longest: one longer is a mistake or an attack, not a receiver. */
export const MAX_TARGET_URL_LENGTH = 2048;

export function targetUrlProblem(text: string, rules: SavedTargetRules): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return "must be an http or https URL";
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return "must be an http or https URL";
  if (url.username || url.password) return "may not carry credentials; use the target's headers";
  if (isRelayItself(url, rules.relayDomain)) return "points at the relay itself";
  if (rules.allowPrivate) return null;
  const host = url.hostname.toLowerCase().replace(/\.$/, "");
  if (host === "localhost" || host.endsWith(".localhost")) return "points at a loopback address";
  const literal = literalAddress(url.hostname);
  const problem = literal ? addressProblem(literal, rules) : null;
  return problem ? `may not point here: ${problem}` : null;
}

/** Resolves a host name to every address it answers with (A and AAAA); runtimes inject it. */
export type ResolveHost = (hostname: string) => Promise<string[]>;

/**
 * Checks what `targetUrl` reaches now: its literal address, or every address its name resolves
 * to. Null when the delivery may go ahead. A name that does not resolve is left to the delivery
 * itself, which fails as unreachable (and is retried) as any network error is.
 */
export async function deliveryAddressProblem(
  targetUrl: string,
  rules: TargetRules,
  resolve: ResolveHost,
): Promise<string | null> {
  if (rules.allowPrivate && !rules.ownListeners?.length) return null;
  const url = new URL(targetUrl);
  const literal = literalAddress(url.hostname);
  const addresses = literal ? [literal] : await resolve(url.hostname).catch(() => []);
  return answersProblem(url.hostname, addresses, rules, Number(portOf(url)));
}

/**
 * Why a connection to `hostname` may not use these addresses (its DNS answers, or its literal),
 * or null; with the `port`, one of the edge's own listeners is refused too. Runtimes call it
 * where they connect, so what is checked is what is reached.
 */
export function answersProblem(
  hostname: string,
  addresses: string[],
  rules: TargetRules,
  port?: number,
): string | null {
  for (const address of addresses) {
    const problem =
      (port === undefined ? null : listenerProblem(address, port, rules.ownListeners ?? [])) ??
      addressProblem(address, rules);
    if (problem) return `target ${hostname} refused: ${problem}`;
  }
  return null;
}
