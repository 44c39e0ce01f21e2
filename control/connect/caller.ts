/**
 * Who is calling: the interceptor authenticates every call and keeps the caller in the call's
 * context values, where each method reads it back into the operations' `Ctx`.
 */
import { Code, createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import type { Ctx, Deps } from "../api/context.ts";
import type { ControlApp } from "../app.ts";
import { authenticate, type Caller } from "../auth.ts";
import { toConnectError } from "../errors.ts";
import { observeCall } from "../observability.ts";

const callerKey = createContextKey<Caller>({ kind: "anonymous" });

/** Authenticates every call and turns whatever a method throws into a ConnectError. */
export function relayInterceptor({ deps, credentials }: ControlApp): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    let status = "OK";
    try {
      req.contextValues.set(
        callerKey,
        await authenticate(deps, credentials, req.header.get("authorization")),
      );
      return await next(req);
    } catch (cause) {
      const error = toConnectError(cause);
      status = Code[error.code];
      throw error;
    } finally {
      const seconds = (performance.now() - started) / 1000;
      observeCall("rpc", `${req.service.typeName}/${req.method.name}`, status, seconds);
    }
  };
}

/** The operations' context for one call: the shared deps and the caller the interceptor found. */
export type ContextOf = (handler: HandlerContext) => Ctx;

export function contextOf(deps: Deps): ContextOf {
  return (handler) => ({ ...deps, caller: handler.values.get(callerKey) });
}
