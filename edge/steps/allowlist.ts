import { RelayError } from "../../core/errors.ts";
import { type Cidr, cidrContains, clientAddress } from "../../core/ip.ts";
import type { Routed, Step } from "../pipeline.ts";

/**
 * An endpoint with an IP allowlist takes calls only from addresses in it (403); a schedule's fire
 * comes from Relay itself, its members' own call.
 */
export function allowlist(trustedProxies: Cidr[]): Step<Routed> {
  return async function allowlist(envelope, next) {
    const { allowlist } = envelope.compiled;
    if (allowlist.length === 0 || envelope.scheduleId) return next(envelope);
    const address = clientAddress(
      envelope.conn.remoteAddress,
      envelope.request.headers.get("x-forwarded-for"),
      trustedProxies,
    );
    if (!address || !allowlist.some((cidr) => cidrContains(cidr, address))) {
      throw new RelayError("ip_not_allowed", "this address is not in the endpoint's allowlist");
    }
    return next(envelope);
  };
}
