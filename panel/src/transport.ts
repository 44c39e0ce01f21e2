/**
 * How the panel reaches the control plane: the generated Connect clients over connect-web, on
 * the page's own origin (the control plane serves both), each carrying one member token.
 */
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";

const transports = new Map<string, Transport>();

/**
 * The transport that signs calls with `token`. One per token for the page's life: connect-query
 * keys its cache by transport, so a project's data stays apart from another token's.
 */
export function transportFor(token: string): Transport {
  let transport = transports.get(token);
  if (!transport) {
    const bearer: Interceptor = (next) => (req) => {
      req.header.set("authorization", `Bearer ${token}`);
      return next(req);
    };
    transport = createConnectTransport({
      baseUrl: window.location.origin,
      interceptors: [bearer],
    });
    transports.set(token, transport);
  }
  return transport;
}
