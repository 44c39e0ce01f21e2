/**
 * Builds the edge from its environment and what the runtime provides: the config, the cache
 * that follows the control plane (ready once its first batch is acknowledged), and the handler.
 * Runtime-neutral; each runtime's entry (main.ts for Node, main.deno.ts) serves the result.
 */

import type { Logger } from "pino";
import { idDigest } from "../core/id-digest.ts";
import { listenerSpec, ownListeners } from "../core/listeners.ts";
import { opsHandler } from "../core/ops.ts";
import { type AesGcm, PayloadCipher } from "../core/payload-codec.ts";
import { importFireKey } from "../core/schedules.ts";
import { newId } from "../core/secrets.ts";
import type { TargetRules } from "../core/targets.ts";
import { startTracing } from "../core/telemetry.ts";
import { createEdge, type EdgeHandler } from "./app.ts";
import { batcher } from "./batcher.ts";
import { type EdgeConfig, loadEdgeConfig } from "./config.ts";
import { connectControlPlane, watchdog } from "./control.ts";
import type { EdgeDeps } from "./deps.ts";
import { edgeTelemetry } from "./observability.ts";
import { RateShares } from "./rate-shares.ts";
import { groupedReservations } from "./reservations.ts";
import { spareHolds } from "./spare-holds.ts";
import { EdgeState } from "./state.ts";
import { streamRecorder } from "./stream-records.ts";
import { temporalHttpStarter, type WorkflowStarter } from "./temporal.ts";
import { workerSyncCalls } from "./worker-sync.ts";
import { taskQueueHealth } from "./workers.ts";

/** The most connections the edge keeps to the control plane for its calls. */
const CONTROL_CONNECTIONS = 128;

export interface Runtime {
  /** Used for the control plane's change stream, and for every other call without `wholeFetch`. */
  fetch: typeof fetch;
  hashKey?: EdgeDeps["hashKey"];
  hmac?: EdgeDeps["hmac"];
  /**
   * A fetch on a connection pool of its own, at most `connections` to a host (no cap when unset),
   * trusting the CA in the PEM file `caFile` beside the system's roots; its answers may be read
   * whole before they are handed on. It serves Temporal's HTTP API and the control plane's calls
   * but its change stream. Without it `fetch` serves: Deno's pools per host without a cap, its
   * trust set by DENO_CERT.
   */
  wholeFetch?: (connections?: number, caFile?: string) => typeof fetch;
  /** AES-GCM for the payload codec; Web Crypto's without it (every runtime has it). */
  aesGcm?: AesGcm;
  /** Calls stream targets, connecting only to addresses `rules` allow. */
  callTarget: (rules: TargetRules) => EdgeDeps["callTarget"];
  /** Runs stream targets' transformations, off the event loop (core/transform-pool.ts). */
  transform: EdgeDeps["transform"];
  /** This machine's interface addresses, where the runtime may list them (core/listeners.ts). */
  machineAddresses?: () => string[];
}

export async function bootEdge(
  env: Record<string, string | undefined>,
  runtime: Runtime,
): Promise<{
  config: EdgeConfig;
  handler: EdgeHandler;
  state: EdgeState;
  log: Logger;
  logError: EdgeDeps["logError"];
  /**
   * After the last call: gives back the credits held ahead for streams, and flushes the spans
   * still queued (none when traces are not exported).
   */
  finish(): Promise<void>;
}> {
  const config = loadEdgeConfig(env);
  const tracing = startTracing(config, "relay-edge");
  const telemetry = edgeTelemetry();
  const control = connectControlPlane({
    baseUrl: config.RELAY_CONTROL_URL,
    edgeToken: config.RELAY_EDGE_TOKEN,
    fetch: runtime.fetch,
    unaryFetch: runtime.wholeFetch?.(CONTROL_CONNECTIONS),
  });
  const edgeId = config.RELAY_EDGE_ID ?? newId("edge");
  const state = new EdgeState({
    control: watchdog(control, config.RELAY_EDGE_WATCH_IDLE_MS),
    edgeId,
    leaseMs: config.RELAY_EDGE_LEASE_MS,
    onKeyLookup: telemetry.keyLookedUp,
  });
  await state.start();
  const rateShares = new RateShares({
    control,
    edgeId,
    logError: telemetry.logError,
  });
  // The first report learns how many edges share each limit; it must answer, as the keys below.
  await rateShares.start();
  const ownPool = (connections?: number) =>
    runtime.wholeFetch?.(connections, config.TEMPORAL_TLS_CA) ?? runtime.fetch;
  // The control plane answers by now (state.start): the keys come from it.
  const { keys: payloadKeys, idKey } = await control.payloadKeys();
  const temporalStarts = temporalHttpStarter({
    baseUrl: config.TEMPORAL_HTTP_ADDRESS,
    namespace: config.TEMPORAL_NAMESPACE,
    apiKey: config.TEMPORAL_API_KEY,
    cipher: await PayloadCipher.fromKeys(payloadKeys, runtime.aesGcm),
    fetch: ownPool(config.RELAY_TEMPORAL_CONNECTIONS),
    syncWaitFetch: ownPool(),
    handOver:
      config.RELAY_WORKER_URL === undefined
        ? undefined
        : workerSyncCalls({
            url: config.RELAY_WORKER_URL,
            edgeToken: config.RELAY_EDGE_TOKEN,
            fetch: ownPool(),
            logError: telemetry.logError,
          }),
    maxSyncPerProject: config.RELAY_SYNC_MAX_PER_PROJECT,
    maxStartsInFlight: config.RELAY_TEMPORAL_MAX_STARTS,
    maxStartWaitMs: config.RELAY_TEMPORAL_START_WAIT_MS,
    startTimeoutMs: config.RELAY_TEMPORAL_START_TIMEOUT_MS,
    onStart: telemetry.temporalStarted,
    logError: telemetry.logError,
  });
  const batch =
    config.RELAY_BATCH_MAX_ITEMS > 1
      ? batcher(temporalStarts, control, {
          maxItems: config.RELAY_BATCH_MAX_ITEMS,
          lingerMs: config.RELAY_BATCH_LINGER_MS,
          maxStoredBytes: config.RELAY_MAX_BODY_BYTES,
          onStarted: telemetry.asyncStarted,
          logError: telemetry.logError,
        })
      : undefined;
  const reserveDeliveries = groupedReservations(control);
  const releaseDeliveries: EdgeDeps["releaseDeliveries"] = (project, requestId, targetIds) =>
    control.releaseDeliveries(project, requestId, targetIds);
  const newRequestId = () => newId("req");
  // A call of its own is a workflow of one request (the metric batches are counted against).
  const temporal: WorkflowStarter = {
    ...temporalStarts,
    startDelivery: (input, trace, bodyTag) =>
      temporalStarts.startDelivery(input, trace, bodyTag).then((status) => {
        telemetry.asyncStarted(1);
        return status;
      }),
  };
  const spares = spareHolds({
    reserve: reserveDeliveries,
    release: releaseDeliveries,
    newRequestId,
    logError: telemetry.logError,
  });
  const relay = createEdge({
    state,
    idDigest: await idDigest(idKey),
    edgeDomain: config.RELAY_EDGE_DOMAIN,
    ...(runtime.hashKey && { hashKey: runtime.hashKey }),
    ...(runtime.hmac && { hmac: runtime.hmac }),
    fireKey: await importFireKey(config.RELAY_EDGE_TOKEN),
    transform: runtime.transform,
    allowPrivateTargets: config.RELAY_ALLOW_PRIVATE_TARGETS,
    callTarget: runtime.callTarget({
      allowPrivate: config.RELAY_ALLOW_PRIVATE_TARGETS,
      ownListeners: ownListeners(
        [
          listenerSpec(config.RELAY_EDGE_HOST, config.RELAY_EDGE_PORT),
          ...config.RELAY_EDGE_LISTENERS,
        ],
        runtime.machineAddresses?.() ?? [],
      ),
    }),
    storeBody: (project, requestId, body) => control.storeBody(project, requestId, body),
    claimIdempotencyKey: (project, claim) => control.claimIdempotencyKey(project, claim),
    joinLane: (place) => control.joinLane(place),
    leaveLane: (place) => control.leaveLane(place),
    reserveDeliveries,
    releaseDeliveries,
    spareHolds: spares,
    temporal,
    ...(batch && { batch }),
    recordStream: streamRecorder({
      send: (record) => control.recordStream(record),
      logError: telemetry.logError,
      observe: telemetry.streamRecorded,
    }),
    recordSkipped: (record) => control.recordSkipped(record),
    newRequestId,
    maxBodyBytes: config.RELAY_MAX_BODY_BYTES,
    bodyTimeoutMs: config.RELAY_BODY_TIMEOUT_MS,
    trustedProxies: config.RELAY_TRUSTED_PROXIES,
    observe: telemetry.answered,
    logError: telemetry.logError,
    rateShares,
  });
  const workers = taskQueueHealth({
    baseUrl: config.TEMPORAL_HTTP_ADDRESS,
    namespace: config.TEMPORAL_NAMESPACE,
    apiKey: config.TEMPORAL_API_KEY,
    fetch: ownPool(1),
  });
  telemetry.watchTaskQueue(workers);
  const ops = opsHandler({
    checks: {
      controlPlane: async () => {
        if (!state.caughtUp()) throw new Error("not caught up with the control plane's changes");
      },
      temporal: () => temporal.ready(),
    },
    // Async calls still queue while no worker runs, so the edge stays ready and says it is
    // degraded (docs/operations.md, Health); the metric is what to alert on.
    advisories: {
      worker: async () => {
        const { problem } = await workers();
        if (problem) throw new Error(problem);
      },
    },
    metrics: () => telemetry.registry.metrics(),
    metricsContentType: telemetry.registry.contentType,
    metricsToken: config.RELAY_METRICS_TOKEN,
  });
  const handler: EdgeHandler = async (request, conn) =>
    (await ops(request, conn.remoteAddress)) ?? relay(request, conn);
  return {
    config,
    handler,
    state,
    log: telemetry.log,
    logError: telemetry.logError,
    finish: async () => {
      await spares.stop();
      await tracing?.shutdown();
    },
  };
}
