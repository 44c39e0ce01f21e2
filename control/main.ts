/** The control plane process: migrate, then serve on one port. */
import type { Client } from "@temporalio/client";
import { payloadSecretsFrom, waitingCapsFrom } from "../core/env.ts";
import { deriveIdKey } from "../core/id-digest.ts";
import { OperatorSessions } from "../core/operator-session.ts";
import { derivePayloadKeys, PayloadCipher, sealedOnly } from "../core/payload-codec.ts";
import { importFireKey } from "../core/schedules.ts";
import { importSealingKey } from "../core/sealing.ts";
import { hashSecret } from "../core/secrets.ts";
import { ROTATION_WORKFLOW } from "../core/temporal.ts";
import { nodeAesGcm } from "../platform/node-crypto.ts";
import { pooledWholeFetch } from "../platform/pooled-fetch.ts";
import {
  connectTemporal,
  relayDataConverter,
  runScheduledNow,
  temporalConnectionOptions,
} from "../platform/temporal.ts";
import { nodeTransformPool } from "../platform/transforms.ts";
import { changeNotifier } from "../store/changes.ts";
import { devClock } from "../store/clock.ts";
import { endedSessions } from "../store/codec-sessions.ts";
import { connect } from "../store/db.ts";
import { migrate } from "../store/migrate.ts";
import { startAcceptedSweep } from "./accepted-sweep.ts";
import type { Deps } from "./api/context.ts";
import { recoveryActivities } from "./api/recovery-steps.ts";
import { scheduleActivities } from "./api/schedule-fires.ts";
import { taskQueueHealth } from "./api/workers.ts";
import { credentialsFrom } from "./auth.ts";
import { loadControlConfig, projectLimitsOf } from "./config.ts";
import { startControlWorker } from "./control-worker.ts";
import { startLaneSweep } from "./lane-sweep.ts";
import { log } from "./observability.ts";
import { createControlServer, defaultServerLimits } from "./server.ts";
import { startWaitingSweep } from "./waiting-sweep.ts";

const config = loadControlConfig(process.env);
const sql = connect(config.DATABASE_URL);
await migrate(sql);
const clock = await devClock(sql, config.RELAY_DEV_CLOCK);
const notifier = changeNotifier(sql);
// The payload codec's keys: the codec endpoint opens with them, and edges get them.
const payloadKeys = await derivePayloadKeys(payloadSecretsFrom(config));
const payloadCipher = await PayloadCipher.fromKeys(payloadKeys, nodeAesGcm);
await notifier.ready;
// Connected on first use; a connect that failed (Temporal down) is tried again next time.
let temporal: Promise<Client> | undefined;
const temporalClient = () => {
  temporal ??= connectTemporal(config).catch((error: unknown) => {
    temporal = undefined;
    throw error;
  });
  return temporal;
};
/** Who may open the codec endpoint: the admin, and the operator if the deployment has one. */
const operatorTokens = [config.RELAY_ADMIN_TOKEN, config.RELAY_OPERATOR_TOKEN].filter(
  (token) => token !== undefined,
);
const deps = {
  sql,
  now: clock.now,
  sealingKey: await importSealingKey(config.RELAY_ENCRYPTION_KEY),
  payloadKeys,
  idKey:
    config.RELAY_DERIVED_IDS === "keyed"
      ? await deriveIdKey(config.RELAY_ENCRYPTION_KEY)
      : new Uint8Array(),
  payloadCipher,
  maxBodyBytes: config.RELAY_MAX_BODY_BYTES,
  initialCredits: config.RELAY_INITIAL_CREDITS,
  projectLimits: projectLimitsOf(config),
  waitingCaps: waitingCapsFrom(config),
  targetRules: {
    allowPrivate: config.RELAY_ALLOW_PRIVATE_TARGETS,
    relayDomain: config.RELAY_EDGE_DOMAIN,
  },
  temporal: temporalClient,
  taskQueue: taskQueueHealth(temporalClient),
  transforms: nodeTransformPool(),
  links: {
    edgeBaseUrl: new URL(`${config.RELAY_EDGE_SCHEME}://${config.RELAY_EDGE_DOMAIN}`),
    workflowsUrl: `${config.RELAY_TEMPORAL_UI_URL.replace(/\/$/, "")}/namespaces/${encodeURIComponent(config.TEMPORAL_NAMESPACE)}/workflows`,
    temporalUiMemberSafe: config.RELAY_TEMPORAL_UI_MEMBER_SAFE,
  },
} satisfies Deps;
const server = createControlServer(
  {
    deps,
    credentials: credentialsFrom(config),
    codec: {
      cipher: payloadCipher,
      sessions: await OperatorSessions.fromSecrets(config.RELAY_ENCRYPTION_KEY, operatorTokens),
      ended: endedSessions(sql),
      operatorTokenHashes: await Promise.all(operatorTokens.map(hashSecret)),
      uiOrigin: new URL(config.RELAY_TEMPORAL_UI_URL).origin,
    },
    notifier,
    clock,
    devClock: config.RELAY_DEV_CLOCK,
    metricsToken: config.RELAY_METRICS_TOKEN,
    runRotation: async () => runScheduledNow<number>(await temporalClient(), ROTATION_WORKFLOW),
  },
  {
    ...defaultServerLimits,
    headTimeoutMs: config.RELAY_CONTROL_HEAD_TIMEOUT_MS,
    edgeBytes: config.RELAY_MAX_BODY_BYTES,
  },
);
server.listen(config.RELAY_CONTROL_PORT, config.RELAY_CONTROL_HOST, () => {
  const url = `http://${config.RELAY_CONTROL_HOST}:${config.RELAY_CONTROL_PORT}`;
  log.info({ url }, "control plane listening");
});

const sweep = startAcceptedSweep({
  sql,
  temporal: {
    baseUrl: config.TEMPORAL_HTTP_ADDRESS.replace(/\/$/, ""),
    namespace: config.TEMPORAL_NAMESPACE,
    apiKey: config.TEMPORAL_API_KEY,
  },
  fetch: pooledWholeFetch(8, config.TEMPORAL_TLS_CA),
  logError: (fields, message) => log.error(fields, message),
});

const laneSweep = startLaneSweep({
  sql,
  temporal: temporalClient,
  logError: (fields, message) => log.error(fields, message),
  logWarn: (fields, message) => log.warn(fields, message),
});

const waitingSweep = startWaitingSweep({
  sql,
  temporal: temporalClient,
  waitingCaps: waitingCapsFrom(config),
  now: clock.now,
  logError: (fields, message) => log.error(fields, message),
});

// Recovery jobs' steps (the control plane starts their replays) and schedules' fires.
const controlWorker = startControlWorker({
  connection: () => temporalConnectionOptions(config),
  namespace: config.TEMPORAL_NAMESPACE,
  dataConverter: relayDataConverter(sealedOnly(payloadCipher)),
  activities: {
    ...recoveryActivities(deps),
    ...scheduleActivities({
      ...deps,
      fireKey: await importFireKey(config.RELAY_EDGE_TOKEN),
      edgeUrl: new URL(config.RELAY_EDGE_URL),
      edgeDomain: config.RELAY_EDGE_DOMAIN,
      fetch: pooledWholeFetch(16),
    }),
  },
  log: {
    warn: (fields, message) => log.warn(fields, message),
    error: (fields, message) => log.error(fields, message),
  },
});

const shutdown = () => {
  sweep.stop();
  laneSweep.stop();
  waitingSweep.stop();
  server.close();
  void controlWorker
    .stop()
    .then(() => sql.end({ timeout: 5 }))
    .then(() => process.exit(0));
};
process.once("SIGTERM", shutdown);
process.once("SIGINT", shutdown);
