/**
 * Relay's activities: the I/O of its workflows. Every call to a target is logged as an attempt
 * before its outcome is reported to Temporal, so the request log shows every try (./attempts.ts).
 */
import { ApplicationFailure, Context } from "@temporalio/activity";
import type { Hold } from "../core/circuit.ts";
import type { DeliveryInput, StreamRecord, SyncInput, SyncOutcome } from "../core/delivery.ts";
import { THROTTLED } from "../core/flow.ts";
import type { LaneJoin } from "../core/lanes-before.ts";
import type { RequestStatus } from "../core/model.ts";
import type { ProjectSlots } from "../core/project-slots.ts";
import { open } from "../core/sealing.ts";
import { decodeSigningSecret, importSigningKey, type SigningKey } from "../core/signing.ts";
import { earlierAttempts, endAttempts, startAttempts } from "../store/attempt-log.ts";
import * as circuits from "../store/circuits.ts";
import { pipelinedTransaction, type Sql } from "../store/db.ts";
import { groupCommit } from "../store/group-commit.ts";
import * as waitingDeliveries from "../store/held.ts";
import {
  claimTurns,
  claimTurnsInOrder,
  joinLane,
  passTurns,
  releaseCarried,
  type TellTurns,
  type Turn,
} from "../store/lanes.ts";
import { notifies } from "../store/notifications.ts";
import { sweepDeletedProjects } from "../store/project-erase.ts";
import * as requestLog from "../store/request-log.ts";
import { pruneRequestLog, type RetentionRun } from "../store/retention.ts";
import { rotateExpiringKeys } from "../store/rotation.ts";
import { signingSecretsOfTarget } from "../store/signing.ts";
import { laneWait, laneWaits } from "../store/waiting.ts";
import type { ActivityDeps, AttemptDeps, RetryPolicy } from "./activity-deps.ts";
import { deliver, firstAttempt, relaySyncCall, relaySyncCalls } from "./attempts.ts";
import { abortedUnlessEvicted } from "./batch-aborts.ts";
import {
  type BatchAttemptDeps,
  firstAttemptsOfBatch,
  type ReleasedInBatch,
  releasedAttemptsOfBatch,
} from "./batch-attempts.ts";
import { callbackSender } from "./callback-sender.ts";
import {
  type BatchedFirst,
  type Busy,
  type DeliverInput,
  type FirstAttempt,
  type InLane,
  type RequestRow,
  rerunVerdict,
  type TriedBefore,
} from "./deliveries.ts";
import { FirstAttemptsInFlight } from "./first-attempts-in-flight.ts";
import { notifier } from "./notify.ts";
import {
  type ClaimedCall,
  callsWaitedHere,
  madeForSome,
  type SyncReceipt,
} from "./sync-answers.ts";
import { TurnHandOffs } from "./turn-hand-offs.ts";

/** A sync call not made: its project had its share of this worker's sync calls in flight. */
const BUSY: SyncOutcome = { kind: "busy" };

/** Bounds the worker's cache of opened signing keys. */
const MAX_OPENED_KEYS = 10_000;

export function createActivities(deps: ActivityDeps) {
  const { sql, now, sealingKey, retryPolicy, logRetentionMs, waitingCaps, deleteHistories } = deps;
  const attempts: AttemptDeps = {
    ...deps,
    signingKeysOf: signingKeys(sql, sealingKey),
    holdOf: (targetId) => circuits.targetHold(sql, targetId),
    // Attempts starting or ending together (a batch's, a busy worker's) share one commit.
    startAttempt: groupCommit(sql, {
      statement: (q, starts) => startAttempts(q, starts, deps.workerId),
    }),
    endAttempt: groupCommit(sql, endAttempts),
    abortSignal: () => Context.current().cancellationSignal,
  };
  const firstAttemptsInFlight = new FirstAttemptsInFlight();
  // A turn given to a request whose batch's activity runs here and listens goes to it unsignalled.
  const handOffs = new TurnHandOffs();
  const tellTurns: TellTurns = (given) => deps.lanes.tellTurns(handOffs.offer(given));
  /** What the log says of requests' earlier tries (./deliveries.ts `rerunVerdict`). */
  const triedBefore = async (requestIds: string[]): Promise<TriedBefore> => {
    const earlier = await earlierAttempts(sql, requestIds);
    // The time matters only beside an attempt without an end (the dev clock reads Postgres).
    const unended = [...earlier.values()].some((e) => e.unended !== null);
    const nowMs = unended ? (await now()).getTime() : 0;
    return (delivery) =>
      rerunVerdict(
        earlier.get(`${delivery.requestId} ${delivery.target.id} ${delivery.replay ?? 0}`),
        delivery.target,
        deps.workerId,
        nowMs,
      );
  };
  /** Sync calls, each within its project's share of this worker's sync calls (else busy). */
  const inSyncShare =
    <Call>(projectOf: (call: Call) => string, make: (calls: Call[]) => Promise<SyncOutcome>[]) =>
    (calls: Call[]): Promise<SyncOutcome>[] => {
      const releases = calls.map((call) => deps.slots.sync.take(projectOf(call)));
      return madeForSome(calls, releases, make, () => Promise.resolve(BUSY)).map((outcome, i) =>
        outcome.finally(releases[i] ?? undefined),
      );
    };
  const syncCallAlone = inSyncShare(
    (call: SyncInput) => call.project,
    (calls) => calls.map((call) => relaySyncCall(attempts, call)),
  );
  const syncCallsClaimed = inSyncShare(
    (claimed: ClaimedCall) => claimed.call.project,
    (claimed) =>
      relaySyncCalls({ ...attempts, signingKeysOf: readOnce(attempts.signingKeysOf) }, claimed),
  );
  /** A batch's attempts: its requests mostly go to the same targets, each one's hold and keys read once. */
  const batchDeps = (project: string): BatchAttemptDeps => {
    const batch = {
      ...attempts,
      holdOf: readOnce(attempts.holdOf),
      signingKeysOf: readOnce(attempts.signingKeysOf),
      abortSignal: () => abortedUnlessEvicted(Context.current().cancellationSignal),
    };
    return {
      attempt: (request, delivery, only, takeSlot) =>
        firstAttemptsInFlight.run(delivery, () =>
          firstAttempt(batch, request, delivery, only, takeSlot),
        ),
      settle: (settling) => requestLog.settleRequests(sql, settling),
      triedBefore,
      slots: deps.slots.attempts,
      lanes: {
        claim: (claims, carrier) =>
          pipelinedTransaction(sql, (tx) => claimTurnsInOrder(tx, claims, carrier)),
        listen: (carrier, claims) => handOffs.listen(carrier, claims),
        listenLonger: () => deps.slots.turnListeners.take(project),
        leave: (leaving, keep) => passTurns(sql, leaving, tellTurns, keep),
        countWaits: (entered, left) =>
          sql.begin(async (tx) => {
            await laneWaits(tx, project, entered, true, waitingCaps);
            await laneWaits(tx, project, left, false, waitingCaps);
          }),
      },
    };
  };
  /** Holds a batch's deliveries for their limited targets, each target's drain told. */
  const holdInBatch = async (
    workflowId: string,
    held: waitingDeliveries.HeldInBatch[],
  ): Promise<void> => {
    await waitingDeliveries.holdInBatch(sql, workflowId, held, waitingCaps);
    for (const targetId of new Set(held.map((h) => h.targetId))) await deps.ensureDrain(targetId);
  };
  return {
    openRequest: (input: RequestRow, status?: "scheduled" | "delivering"): Promise<void> =>
      requestLog.openRequest(sql, input, status),
    /** A batch's delayed requests, opened in the log as scheduled in one statement (./delays.ts). */
    openScheduled: async (requests: DeliveryInput[]): Promise<void> => {
      const rows = requests.map(({ targets, headers, bodyBase64, body, ...row }) => row);
      await requestLog.insertRequests(sql, rows, "scheduled");
    },
    /** Cancelled, or how it settled when a target answered 2xx first. */
    // Histories before the targets were passed: none (a target never tried counts as got).
    cancelRequest: (input: RequestRow, targetIds: string[] = []): Promise<RequestStatus> =>
      requestLog.cancelRequest(sql, input, waitingCaps, targetIds),
    /** `targetIds`: the deliveries settled; absent in a call scheduled before they were named. */
    settleRequest: (requestId: string, targetIds: string[] = []): Promise<RequestStatus> =>
      requestLog.settleRequest(sql, requestId, targetIds),
    retryPolicy: async (): Promise<RetryPolicy> => retryPolicy,
    firstAttempt: async (
      request: RequestRow,
      delivery: DeliverInput,
      /** The request's only target: an attempt that ends it settles it in the same commit. */
      only: boolean,
      /** It may have run before (its task retried, its batch's activity lost): the log says. */
      mayHaveRun = false,
    ): Promise<FirstAttempt> => {
      const before = mayHaveRun ? (await triedBefore([request.requestId]))(delivery) : undefined;
      if (before) return before;
      return firstAttemptsInFlight.run(delivery, () =>
        firstAttempt(attempts, request, delivery, only),
      );
    },
    /** A batch's first attempts, all in one local activity (./batch-attempts.ts). */
    firstAttemptsOfBatch: (project: string, requests: DeliveryInput[]): Promise<BatchedFirst[]> =>
      firstAttemptsOfBatch(batchDeps(project), project, batchOfActivity(), requests),
    /** Deliveries a batch holds for limited targets (./batch-holds.ts). */
    holdInBatch,
    /** The attempts of a batch's deliveries their drains let go (./batch-attempts.ts). */
    releasedAttemptsOfBatch: (
      project: string,
      workflowId: string,
      released: ReleasedInBatch[],
    ): Promise<((FirstAttempt | null)[] | InLane)[]> =>
      releasedAttemptsOfBatch(
        {
          ...batchDeps(project),
          holdAgain: (held) =>
            holdInBatch(
              workflowId,
              held.map(({ request, targetId }) => ({
                targetId,
                requestId: request.requestId,
                acceptedAt: request.receivedAt,
              })),
            ),
        },
        project,
        workflowId,
        released,
      ),
    /** A batch's held deliveries of these requests, which go on as workflows of their own. */
    forgetHeldInBatch: (workflowId: string, requestIds: string[]): Promise<void> =>
      waitingDeliveries.forgetHeldInBatch(sql, workflowId, requestIds, waitingCaps),
    /** A batch's ordered requests go on as workflows of their own: it carries them no more. */
    releaseCarried: (workflowId: string, requestIds: string[]): Promise<void> =>
      releaseCarried(sql, workflowId, requestIds),
    deliver: async (input: DeliverInput): Promise<number | "held" | "skipped" | Busy> => {
      // An earlier try may have reached the target and its verdict been lost: a first run in
      // flight elsewhere, a first attempt whose local activity failed, or this activity's own
      // earlier run (Temporal retries one whose completion it never got, its worker killed).
      // Delivered meanwhile, it is not called again; still in flight on a live worker, it waits.
      const mayHaveLanded = input.mayHaveLanded || Context.current().info.attempt > 1;
      const before = mayHaveLanded ? (await triedBefore([input.requestId]))(input) : undefined;
      if (before?.kind === "delivered" || before?.kind === "busy") {
        return before.kind === "delivered" ? before.status : before;
      }
      return deliver(attempts, input);
    },
    holdDelivery: async (
      targetId: string,
      workflowId: string,
      /** When its request was accepted (RFC 3339): held deliveries go in this order. */
      acceptedAt?: string,
    ): Promise<Hold | typeof THROTTLED | null> => {
      const accepted = acceptedAt === undefined ? undefined : new Date(acceptedAt);
      const hold = await waitingDeliveries.holdDelivery(
        sql,
        targetId,
        workflowId,
        waitingCaps,
        accepted,
      );
      // The target's drain lets it go as the target's limits allow (core/flow.ts).
      if (hold === THROTTLED) await deps.ensureDrain(targetId);
      // Whatever befell the start when it opened, a delivery waiting on it sees it probed.
      if (hold === "circuit_open") await deps.ensureCircuit(targetId);
      return hold;
    },
    /** A request begun before lanes in Postgres joins its lane's workflow (./lanes-before.ts). */
    joinOrderingLane: (laneId: string, project: string, join: LaneJoin): Promise<void> =>
      deps.lanes.join(laneId, project, join),
    runningWorkflows: (workflowIds: string[]): Promise<string[]> => deps.lanes.running(workflowIds),
    /**
     * An ordered request enters its lane (store/lanes.ts): counted as waiting, joined at the
     * back when its edge did not join it, and its turn at each target claimed.
     */
    enterLane: (
      wait: { requestId: string; project: string; laneId: string },
      targetIds: string[],
      join: boolean,
    ): Promise<Record<string, Turn>> =>
      sql.begin(async (tx) => {
        await laneWait(tx, wait, true, waitingCaps);
        if (join) await joinLane(tx, wait.laneId, wait.requestId, targetIds);
        return claimTurns(tx, wait.laneId, wait.requestId, targetIds);
      }),
    /**
     * It leaves its lane at these targets: the parked requests given the turn are handed it here
     * or signalled (one client call each, not a workflow command's trip through Temporal's queues).
     */
    leaveLane: async (laneId: string, requestId: string, targetIds: string[]): Promise<void> => {
      await passTurns(sql, [{ laneId, requestId, targetIds }], tellTurns);
    },
    /** An ordered request enters its lane (or leaves it): a waiting delivery of its project. */
    laneWait: (
      wait: { requestId: string; project: string; laneId: string },
      waiting: boolean,
    ): Promise<void> => sql.begin((tx) => laneWait(tx, wait, waiting, waitingCaps)),
    circuitState: (targetId: string): Promise<circuits.CircuitState> =>
      circuits.circuitState(sql, targetId),
    releaseHeld: (
      targetId: string,
      limit: number,
      probe: boolean,
    ): Promise<waitingDeliveries.Released[]> =>
      waitingDeliveries.releaseHeld(sql, targetId, limit, waitingCaps, probe),
    recordProbeFailed: (targetId: string): Promise<void> =>
      circuits.recordProbeFailed(sql, targetId),
    disableTarget: async (targetId: string): Promise<boolean> => {
      const disabled = await circuits.disableTarget(sql, targetId);
      if (disabled) deps.observeCircuit(targetId, "disabled");
      return disabled;
    },
    /** The call of a sync workflow an edge started (its own: no listener here waits for it). */
    relaySyncCall: async (input: SyncInput): Promise<SyncOutcome> =>
      (await syncCallAlone([input])[0]) ?? BUSY,
    /** A batch's sync calls, those a listener here waits for (./sync-calls.ts). */
    relaySyncCallsHere: (calls: SyncInput[]): Promise<SyncReceipt[]> =>
      callsWaitedHere(deps.syncAnswers, calls, syncCallsClaimed),
    /** A stream record queued before edges sent them to the control plane (workflows.ts). */
    recordStreamCall: (record: StreamRecord): Promise<void> => requestLog.recordStream(sql, record),
    /** Whether the project set a notification URL: a workflow raises its events only then. */
    projectNotifies: (project: string): Promise<boolean> => notifies(sql, project),
    notify: inProjectShare(
      deps.slots.notifications,
      notifier({ sql, sealingKey, callTarget: deps.callTarget, now }),
    ),
    callBack: inProjectShare(deps.slots.notifications, callbackSender(attempts)),
    rotateExpiringKeys: async (): Promise<number> =>
      rotateExpiringKeys(sql, await now(), sealingKey),
    /** The daily retention run, and deleted projects' histories deleted a second time. */
    pruneExpiredRequests: async (): Promise<RetentionRun> => {
      const at = await now();
      const pruned = await pruneRequestLog(sql, at, logRetentionMs);
      return { ...pruned, deletedProjects: await sweepDeletedProjects(sql, at, deleteHistories) };
    },
  };
}

/** The workflow id of the batch whose local activity runs now: it carries the batch's lanes. */
function batchOfActivity(): string {
  const batch = Context.current().info.workflowExecution?.workflowId;
  if (!batch) throw new Error("a batch's attempts run only as its local activity");
  return batch;
}

/**
 * A notification or a callback over its project's share of the notifications' slots is tried
 * again as a busy attempt would be: one project's slow URLs never hold another's.
 */
function inProjectShare<A extends [{ project: string }, ...unknown[]], T>(
  slots: ProjectSlots,
  send: (...args: A) => Promise<T>,
): (...args: A) => Promise<T> {
  return async (...args) => {
    const { project } = args[0];
    const release = slots.take(project);
    if (!release) {
      throw ApplicationFailure.retryable(
        "this project has too many notifications and callbacks in flight on this worker",
        "ProjectBusy",
        { nextRetryDelay: slots.waitMs(project, Math.random()) },
      );
    }
    return send(...args).finally(release);
  };
}

/**
 * The keys that sign for a target's endpoint now, read per attempt (a rotation shows at once, an
 * overlap ends on time); none for a target whose endpoint is gone. The plaintext only passes
 * through here, never into a workflow input, history or log. Opened keys are kept by secret id:
 * a sealed secret never changes, so they stay valid.
 */
function signingKeys(sql: Sql, sealingKey: CryptoKey) {
  const openedKeys = new Map<string, Promise<CryptoKey>>();
  return async (targetId: string, at: Date): Promise<SigningKey[]> => {
    const sealed = await signingSecretsOfTarget(sql, targetId, at);
    if (openedKeys.size > MAX_OPENED_KEYS) openedKeys.clear();
    return Promise.all(
      sealed.map(async (secret) => {
        let key = openedKeys.get(secret.id);
        if (!key) {
          key = open(sealingKey, new Uint8Array(secret.sealedSecret), secret.id).then((plain) =>
            importSigningKey(decodeSigningSecret(plain)),
          );
          key.catch(() => openedKeys.delete(secret.id));
          openedKeys.set(secret.id, key);
        }
        return { key: await key, expiresAt: secret.expiresAt };
      }),
    );
  };
}

/** `read`, asked once per target: the first answer serves the later calls. */
function readOnce<T, Rest extends unknown[]>(
  read: (targetId: string, ...rest: Rest) => Promise<T>,
): (targetId: string, ...rest: Rest) => Promise<T> {
  const answers = new Map<string, Promise<T>>();
  return (targetId, ...rest) => {
    let answer = answers.get(targetId);
    if (!answer) {
      answer = read(targetId, ...rest);
      answers.set(targetId, answer);
    }
    return answer;
  };
}

export type Activities = ReturnType<typeof createActivities>;
