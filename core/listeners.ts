/**
 * The edge's own listeners, as targets see them: a delivery to one of them would call Relay's
 * edge directly, so it is refused wherever it is made, even where private targets are allowed
 * (dev stacks deliver to loopback, but not to the edge's own port). The CDN-Loop mark
 * (core/loop.ts) stops loops in general; this stops the direct one before it is sent.
 */
import { type Cidr, cidrContains, parseCidr, parseIp } from "./ip.ts";

/** A listener as configured: an address, or null for every address of its machine, and a port. */
export interface ListenerSpec {
  address: string | null;
  port: number;
}

/** The addresses that reach a listener, with its port. */
export interface OwnListener {
  addresses: Cidr[];
  port: number;
}

/**
 * `host:port` pairs, comma-separated (`127.0.0.1:8787,[::1]:8787`). A host that is an IP address
 * is that address; a wildcard (`0.0.0.0`, `[::]`) or a name (`localhost`) is every address of the
 * machine, as a listener on it may be reached by any of them. Null when an entry is no pair.
 */
export function parseListeners(text: string): ListenerSpec[] | null {
  const specs: ListenerSpec[] = [];
  for (const entry of text.split(",").map((part) => part.trim())) {
    if (!entry) continue;
    const [, host = "", portText = ""] = /^(\[[^\]]+\]|[^:[\]]+):(\d{1,5})$/.exec(entry) ?? [];
    const port = Number(portText);
    if (!host || port < 1 || port > 65_535) return null;
    if (host.startsWith("[") && !parseIp(host.slice(1, -1))) return null;
    specs.push(listenerSpec(host, port));
  }
  return specs;
}

/** A listener on `host` (an address, bracketed or not, a wildcard or a name) at `port`. */
export function listenerSpec(host: string, port: number): ListenerSpec {
  const bare = host.replace(/^\[|\]$/g, "");
  const ip = parseIp(bare);
  return { address: ip && !isUnspecified(ip) ? bare : null, port };
}

/** Loopback in both families: on every machine, whatever its interfaces. */
const LOOPBACK = ["127.0.0.0/8", "::1/128"].map((cidr) => parseCidr(cidr) as Cidr);

/**
 * The listeners, with the addresses that reach each: its own, or for a whole-machine one,
 * loopback and `machineAddresses` (the machine's interfaces, where the runtime can list them).
 */
export function ownListeners(specs: ListenerSpec[], machineAddresses: string[]): OwnListener[] {
  const machine = [...LOOPBACK, ...machineAddresses.flatMap((address) => parseCidr(address) ?? [])];
  return specs.map(({ address, port }) => ({
    addresses: address === null ? machine : [parseCidr(address) as Cidr],
    port,
  }));
}

/**
 * Why a connection to `address` at `port` would reach one of `listeners`, or null. An
 * unspecified address (`0.0.0.0`, `::`) connects to the machine itself, as loopback does.
 */
export function listenerProblem(
  address: string,
  port: number,
  listeners: OwnListener[],
): string | null {
  const ip = parseIp(address);
  if (!ip) return null;
  const reached = isUnspecified(ip)
    ? { version: ip.version, value: ip.version === 4 ? 0x7f000001n : 1n }
    : ip;
  const own = listeners.some(
    (listener) =>
      listener.port === port && listener.addresses.some((cidr) => cidrContains(cidr, reached)),
  );
  return own ? `${address} port ${port} is Relay's own edge` : null;
}

function isUnspecified(ip: { value: bigint }): boolean {
  return ip.value === 0n;
}
