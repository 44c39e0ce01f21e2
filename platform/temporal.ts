/** The Temporal client the worker and the control plane share, and the daily Schedules. */
import { readFile } from "node:fs/promises";
import { setTimeout as sleep } from "node:timers/promises";
import {
  Client,
  Connection,
  type DataConverter,
  isGrpcServiceError,
  ScheduleAlreadyRunning,
  ScheduleOverlapPolicy,
  WorkflowNotFoundError,
} from "@temporalio/client";
import { defineSearchAttributeKey, type Payload } from "@temporalio/common";
import { payloadSecretsFrom } from "../core/env.ts";
import { LANE_GO_SIGNAL } from "../core/lanes.ts";
import {
  LANE_JOIN_SIGNAL,
  LANE_WORKFLOW,
  type LaneInput,
  type LaneJoin,
} from "../core/lanes-before.ts";
import { PayloadCipher } from "../core/payload-codec.ts";
import {
  CIRCUIT_CHANGED_SIGNAL,
  CIRCUIT_WORKFLOW,
  circuitWorkflowId,
  fairnessOf,
  RETENTION_SCHEDULE_ID,
  RETENTION_WORKFLOW,
  ROTATION_SCHEDULE_ID,
  ROTATION_WORKFLOW,
  searchAttributes,
  TASK_QUEUE,
} from "../core/temporal.ts";
import { siblingModule } from "./modules.ts";
import { nodeAesGcm } from "./node-crypto.ts";

/** The project a workflow belongs to, as the SDK's typed search attributes name it. */
export const projectKey = defineSearchAttributeKey(searchAttributes.project, "KEYWORD");

export interface TemporalSettings {
  TEMPORAL_ADDRESS: string;
  TEMPORAL_NAMESPACE: string;
  TEMPORAL_API_KEY?: string | undefined;
  TEMPORAL_TLS_CA?: string | undefined;
  RELAY_ENCRYPTION_KEY: string;
  RELAY_PAYLOAD_KEYS?: string[] | undefined;
}

/** The payload codec of the deployment's secrets (core/payload-codec.ts). */
export const payloadCipherOf = (settings: TemporalSettings) =>
  PayloadCipher.fromSecrets(payloadSecretsFrom(settings), nodeAesGcm);

/**
 * How Relay's payloads reach Temporal: sealed by the codec, failures' messages with them. A
 * worker's workflow bundle takes the failure converter by the same path.
 */
export function relayDataConverter(
  cipher: Pick<PayloadCipher, "encode" | "decode">,
): DataConverter {
  return {
    payloadCodecs: [cipher],
    failureConverterPath: FAILURE_CONVERTER_PATH,
  };
}

export const FAILURE_CONVERTER_PATH = siblingModule(import.meta.url, "temporal-failures");

/**
 * How the client and the worker's native connection reach Temporal: over TLS with a CA of the
 * deployment's own (TEMPORAL_TLS_CA) or the system's roots (an API key, as Temporal Cloud
 * takes), in plain gRPC otherwise.
 */
export async function temporalConnectionOptions(
  settings: Pick<TemporalSettings, "TEMPORAL_ADDRESS" | "TEMPORAL_API_KEY" | "TEMPORAL_TLS_CA">,
) {
  const ca = settings.TEMPORAL_TLS_CA && (await readFile(settings.TEMPORAL_TLS_CA));
  return {
    address: settings.TEMPORAL_ADDRESS,
    ...(settings.TEMPORAL_API_KEY && { apiKey: settings.TEMPORAL_API_KEY, tls: true }),
    ...(ca && { tls: { serverRootCACertificate: ca } }),
  };
}

export async function connectTemporal(settings: TemporalSettings): Promise<Client> {
  const connection = await Connection.connect(await temporalConnectionOptions(settings));
  return new Client({
    connection,
    namespace: settings.TEMPORAL_NAMESPACE,
    dataConverter: relayDataConverter(await payloadCipherOf(settings)),
  });
}

/**
 * The value of a payload read from a history as Temporal stores it (sealed, or from before the
 * codec): raw history reads skip the client's codec, so it is applied here.
 */
export async function storedPayloadValue<T>(client: Client, payload: Payload): Promise<T> {
  const { payloadCodecs, payloadConverter } = client.options.loadedDataConverter;
  let decoded = [payload];
  for (const codec of [...payloadCodecs].reverse()) decoded = await codec.decode(decoded);
  return payloadConverter.fromPayload<T>(decoded[0] ?? payload);
}

/** How long a readiness check waits for Temporal's answer. */
const ANSWER_DEADLINE_MS = 2000;

/** Resolves when the Temporal server answers a cheap call (a process's /readyz). */
export async function temporalAnswers(client: Client): Promise<void> {
  await client.withDeadline(Date.now() + ANSWER_DEADLINE_MS, () =>
    client.workflowService.getSystemInfo({}),
  );
}

/** The daily Schedules (key rotation, log retention); operators see them in the Temporal UI. */
const DAILY = [
  { scheduleId: ROTATION_SCHEDULE_ID, workflowType: ROTATION_WORKFLOW },
  { scheduleId: RETENTION_SCHEDULE_ID, workflowType: RETENTION_WORKFLOW },
];

/** Creates each daily Schedule unless it exists. */
export async function ensureSchedules(client: Client): Promise<void> {
  for (const { scheduleId, workflowType } of DAILY) {
    await client.schedule
      .create({
        scheduleId,
        spec: { intervals: [{ every: "1 day" }] },
        action: { type: "startWorkflow", workflowType, taskQueue: TASK_QUEUE },
        // A run that is late or still going is not doubled; the runs are idempotent anyway.
        policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: "1 day" },
      })
      .catch((error: unknown) => {
        if (!(error instanceof ScheduleAlreadyRunning)) throw error;
      });
  }
}

/** One run of a scheduled workflow now, through Temporal like the scheduled ones. */
export async function runScheduledNow<T>(
  client: Client,
  workflowType: typeof ROTATION_WORKFLOW | typeof RETENTION_WORKFLOW,
): Promise<T> {
  return client.workflow.execute<() => Promise<T>>(workflowType, {
    taskQueue: TASK_QUEUE,
    workflowId: `${workflowType}-manual-${Date.now()}`,
  });
}

/**
 * Starts a target's circuit workflow, or wakes the one running: its circuit just opened, or a
 * member resumed or enabled it, so its waiting deliveries may go (or be probed).
 */
export async function wakeCircuit(client: Client, targetId: string): Promise<void> {
  await client.workflow.signalWithStart(CIRCUIT_WORKFLOW, {
    workflowId: circuitWorkflowId(targetId),
    taskQueue: TASK_QUEUE,
    args: [{ targetId }],
    signal: CIRCUIT_CHANGED_SIGNAL,
  });
}

/**
 * Starts a target's circuit workflow unless one runs: its circuit just opened, or a delivery
 * waits on it, so something must probe it. A running one is left as it is (it reads the circuit
 * each round).
 */
export async function ensureCircuit(client: Client, targetId: string): Promise<void> {
  await client.workflow.start(CIRCUIT_WORKFLOW, {
    workflowId: circuitWorkflowId(targetId),
    taskQueue: TASK_QUEUE,
    args: [{ targetId }],
    workflowIdConflictPolicy: "USE_EXISTING",
  });
}

/**
 * A request of a release before lanes in Postgres takes its place in its lane's workflow
 * (workflows/lanes-before.ts): signal-with-start, on its task queue and fairness key.
 */
export async function joinOrderingLane(
  client: Client,
  laneId: string,
  project: string,
  join: LaneJoin,
): Promise<void> {
  await client.workflow.signalWithStart(LANE_WORKFLOW, {
    workflowId: laneId,
    taskQueue: TASK_QUEUE,
    priority: fairnessOf(project),
    args: [{ project } satisfies LaneInput],
    signal: LANE_JOIN_SIGNAL,
    signalArgs: [join],
  });
}

/** Which of these workflows still run (the heads of ordering lanes that have not moved). */
export async function runningWorkflows(client: Client, workflowIds: string[]): Promise<string[]> {
  const described = await Promise.all(
    workflowIds.map((id) =>
      client.workflow
        .getHandle(id)
        .describe()
        .then((d) => (d.status.name === "RUNNING" ? id : null))
        .catch((error: unknown) => {
          if (error instanceof WorkflowNotFoundError) return null;
          throw error;
        }),
    ),
  );
  return described.filter((id) => id !== null);
}

/** A turn given to a request at a target, and the workflow that carries it there. */
interface CarriedTurn {
  requestId: string;
  targetId: string;
  workflowId: string;
}

/**
 * Tells requests parked in their lanes that their turn came (store/lanes.ts `leaveLanes`), through
 * the workflow carrying each: a batch gets one signal for all its turns given together, a
 * request's own workflow one per target. A turn whose batch is gone is told to the request's own
 * workflow, and with `ownToo` one whose batch runs is too: a batch's activity outliving its run
 * (../workflows/batch-aborts.ts) can park again under the batch a request it had let go on alone.
 * Answers those whose carriers are gone (no signal found one running).
 */
export async function signalTurns<T extends CarriedTurn>(
  client: Client,
  given: T[],
  { ownToo = false } = {},
): Promise<T[]> {
  const ownOf = (turns: T[]) =>
    turns
      .filter((turn) => turn.workflowId !== turn.requestId)
      .map((turn) => ({ ...turn, workflowId: turn.requestId, turn }));
  const [gone, ownGoneToo] = await Promise.all([
    signalCarriers(client, given),
    ownToo ? signalCarriers(client, ownOf(given)) : null,
  ]);
  const ownGone = new Set(
    (ownGoneToo ?? (await signalCarriers(client, ownOf(gone)))).map((own) => own.turn),
  );
  return gone.filter((turn) => turn.workflowId === turn.requestId || ownGone.has(turn));
}

/** Signals each turn's carrier (`workflowId`); answers the turns whose carrier no signal found. */
async function signalCarriers<T extends CarriedTurn>(client: Client, given: T[]): Promise<T[]> {
  if (given.length === 0) return [];
  const byCarrier = new Map<string, T[]>();
  for (const turn of given) {
    const own = turn.workflowId === turn.requestId;
    const key = own ? `${turn.workflowId} ${turn.targetId}` : turn.workflowId;
    byCarrier.set(key, [...(byCarrier.get(key) ?? []), turn]);
  }
  const gone = await Promise.all(
    [...byCarrier.values()].map((turns) => {
      const [first] = turns as [T];
      const told = turns.map(({ requestId, targetId }) => ({ requestId, targetId }));
      return client.workflow
        .getHandle(first.workflowId)
        .signal(LANE_GO_SIGNAL, { targetId: first.targetId, requestId: first.requestId, told })
        .then(
          () => [],
          (error: unknown) => {
            if (error instanceof WorkflowNotFoundError) return turns;
            throw error;
          },
        );
    }),
  );
  return gone.flat();
}

/** gRPC's RESOURCE_EXHAUSTED: Temporal's answer while the namespace runs its most batch jobs. */
const RESOURCE_EXHAUSTED = 8;
/** How long a deletion waits for another batch job to end (Temporal runs one at a time). */
const BATCH_WAIT_MS = 20_000;
const BATCH_LOOK_MS = 250;

/**
 * Deletes every workflow of a deleted project, running ones terminated first, with a batch
 * operation of Temporal's by the project's search attribute: it goes on in the background.
 * `pass` names the job with the slug (a slug is never given out again; Temporal refuses a job id
 * twice). A namespace runs one batch job at a time unless its operator allows more
 * (`frontend.MaxConcurrentBatchOperationPerNamespace`), so a deletion refused for another's waits
 * BATCH_WAIT_MS at most for it to end, then is refused as Temporal refused it.
 */
export async function deleteProjectHistories(
  client: Client,
  slug: string,
  pass: string,
): Promise<void> {
  const request = {
    namespace: client.options.namespace,
    jobId: `delete-project-${slug}-${pass}`,
    reason: `project ${slug} deleted`,
    visibilityQuery: `${searchAttributes.project} = "${slug}"`,
    deletionOperation: {},
  };
  const deadline = Date.now() + BATCH_WAIT_MS;
  for (;;) {
    try {
      await client.workflowService.startBatchOperation(request);
      return;
    } catch (error) {
      const busy = isGrpcServiceError(error) && error.code === RESOURCE_EXHAUSTED;
      if (!busy || Date.now() > deadline) throw error;
      await sleep(BATCH_LOOK_MS);
    }
  }
}
