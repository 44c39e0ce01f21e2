/**
 * Adaptive batching of immediate async calls (core/grouped.ts: group commit, by project and
 * pool). A workflow per request costs Temporal and the worker about 24 ms of CPU here; a
 * workflow carrying 32 requests about 1.7 ms each (docs/benchmarks.md, Batch probe). So calls
 * of a project that arrive while one of its groups is in flight go together next, in one batch
 * workflow (or their own, when alone).
 *
 * Accepted before started: a group's calls are reserved and their workflow's start kept in
 * Postgres in one control-plane call (`AcceptCalls`), and they are answered 202 once that
 * commits. Their start is made after, with the project's other groups accepted while its last
 * start was in flight (one workflow for all of them), and confirmed with the edge's next
 * acceptance; a start it never makes (it died, Temporal failed it) the control plane's sweep
 * makes, group by group. So a caller does not wait for Temporal's start (most of a 202's time),
 * and a caller sending call after call still has them share workflows. When a call of the group
 * is refused, the control plane does not answer, the edge's last start failed or too many of
 * the project's calls wait for their start, the group takes the older path: reserved, started,
 * then answered (a failed start gives its reservations back and the callers 503).
 *
 * A caller sending one call at a time is accepted alone: nothing of its project is in flight.
 * Calls with an Idempotency-Key, a delay, a large body, an ordering lane or a sync or stream
 * target never come here (`joinsBatch`): their workflow id, timer, stored body, place in their
 * lane or answer is theirs alone.
 */
import type { CallReservation, ReservationRefusal } from "../core/billing.ts";
import { type Accepted, acceptedStatus, type DeliveryInput } from "../core/delivery.ts";
import { grouped } from "../core/grouped.ts";
import type { TraceContext } from "../core/tracing.ts";
import type { ControlPlane } from "./control.ts";
import type { BatchStarter, PreparedStart } from "./temporal.ts";

export interface BatchOptions {
  /** Requests one batch carries at most (RELAY_BATCH_MAX_ITEMS). */
  maxItems: number;
  /** Told how many calls each start carried once it was answered (a metric). */
  onStarted?: (requests: number) => void;
  logError: (fields: Record<string, unknown>, message: string) => void;
}

/**
 * Body bytes (base64) a request may bring into a batch, and a batch in all: the batch's input
 * holds each body, and Temporal warns past 256 KiB a payload and refuses 2 MB.
 */
const BATCHABLE_BODY_CHARS = 16 * 1024;
const BATCH_BODY_CHARS = 256 * 1024;

/** An immediate async call, ready to start: its input, its trace and the credits it holds. */
export interface BatchedCall {
  input: DeliveryInput;
  trace: TraceContext;
  reservation: CallReservation;
}

/** A call started (what its caller is told), or refused by its reservation. */
export type BatchAnswer = { accepted: Accepted } | { refused: ReservationRefusal };

/** Reserves and starts a call with its project's others of the moment. */
export type Batch = (call: BatchedCall) => Promise<BatchAnswer>;

/**
 * Whether a call of `input` (to async targets only) may share a batch: immediate, small body,
 * unordered (an ordered call joins its lane once its own workflow runs, before its 202).
 */
export function joinsBatch(input: DeliveryInput, idempotent: boolean): boolean {
  return (
    !idempotent &&
    input.ordering === undefined &&
    input.notBefore === undefined &&
    input.bodyRef === undefined &&
    input.bodyBase64.length <= BATCHABLE_BODY_CHARS
  );
}

/** Starts an edge confirms at most in one acceptance; older ones are left to the sweep. */
const MAX_CONFIRMED = 1024;
/** A project's calls accepted and not started yet, at most, in full batches. */
const UNSTARTED_GROUPS = 4;

/** Calls accepted together, and the start kept for them. */
interface AcceptedGroup {
  calls: BatchedCall[];
  start: PreparedStart;
}

const callsOf = (groups: readonly AcceptedGroup[]) =>
  groups.reduce((n, g) => n + g.calls.length, 0);
const charsOf = (groups: readonly Pick<AcceptedGroup, "calls">[]) =>
  groups.reduce(
    (chars, g) => g.calls.reduce((sum, c) => sum + c.input.bodyBase64.length, chars),
    0,
  );
/**
 * How long a group waits for its acceptance before it takes the older path, and how long the
 * groups after it take that path at once: a control plane that cannot reach Postgres may take
 * its connect timeout to say so, and the older path needs no Postgres for an unmetered pool.
 */
const ACCEPT_WAIT_MS = 1000;
const ACCEPT_PAUSE_MS = 5000;

export function batcher(
  starter: BatchStarter,
  control: Pick<
    ControlPlane,
    "reserveDeliveries" | "reserveDeliveriesBatch" | "releaseDeliveries" | "acceptCalls"
  >,
  options: BatchOptions,
): Batch {
  /** Workflows started since the last acceptance, which that one confirms. */
  let made: string[] = [];
  /** A start after its 202 failed: groups take the older path until a start succeeds again. */
  let startsFailing = false;
  /** An acceptance failed (Postgres down, say): groups take the older path until then. */
  let acceptsPausedUntil = 0;

  /**
   * The group reserved and its start kept, in one call; null when not accepted (`refusals`
   * then says which calls were refused, or is null when the control plane did not answer).
   */
  async function accept(
    calls: BatchedCall[],
    start: PreparedStart,
  ): Promise<{ accepted: boolean; refusals: (ReservationRefusal | null)[] | null }> {
    const [first] = calls as [BatchedCall];
    const started = made;
    made = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await Promise.race([
        control.acceptCalls({
          project: first.reservation.project,
          pool: first.reservation.pool,
          calls: calls.map(({ reservation }) => ({
            requestId: reservation.requestId,
            holds: reservation.holds,
          })),
          workflowId: start.workflowId,
          start: start.body,
          started,
        }),
        new Promise<never>((_, fail) => {
          timer = setTimeout(() => fail(new Error("no answer in time")), ACCEPT_WAIT_MS);
        }),
      ]);
    } catch (err) {
      // Should it commit after all, its start is swept: made twice is made once.
      made = [...started, ...made].slice(-MAX_CONFIRMED);
      acceptsPausedUntil = Date.now() + ACCEPT_PAUSE_MS;
      options.logError({ err, project: first.reservation.project }, "calls not accepted");
      return { accepted: false, refusals: null };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Each call's refusal, or null: the calls holding credits reserved per pool, in order. */
  async function reserve(calls: BatchedCall[]): Promise<(ReservationRefusal | null)[]> {
    const refusals: (ReservationRefusal | null)[] = calls.map(() => null);
    const holding = calls.flatMap((call, i) => (call.reservation.holds.length > 0 ? [i] : []));
    for (const pool of new Set(holding.map((i) => calls[i]?.reservation.pool))) {
      const ofPool = holding.filter((i) => calls[i]?.reservation.pool === pool);
      const reservations = ofPool.map((i) => (calls[i] as BatchedCall).reservation);
      const [first] = reservations;
      if (!first) continue;
      const answers = await (reservations.length === 1
        ? control.reserveDeliveries(first).then((refusal) => [refusal])
        : control.reserveDeliveriesBatch({
            project: first.project,
            pool: first.pool,
            calls: reservations.map(({ requestId, holds }) => ({ requestId, holds })),
          })
      ).catch((err: unknown) => {
        // As a lone call's (edge/steps/credits.ts): served from the cache, unreserved.
        options.logError(
          { err, project: first.project },
          "no reservation: the control plane did not answer",
        );
        return reservations.map(() => null);
      });
      ofPool.forEach((i, n) => {
        refusals[i] = answers[n] ?? null;
      });
    }
    return refusals;
  }

  /** Gives back what started calls reserved, when their start failed. */
  function release(calls: BatchedCall[]): void {
    for (const { reservation } of calls) {
      const targetIds = reservation.holds.map((h) => h.targetId);
      if (targetIds.length === 0) continue;
      control
        .releaseDeliveries(reservation.project, reservation.requestId, targetIds)
        .catch((err: unknown) => {
          options.logError(
            { err, requestId: reservation.requestId },
            "a reservation could not be given back",
          );
        });
    }
  }

  const accepted = (calls: BatchedCall[]): BatchAnswer[] =>
    calls.map((call) => ({ accepted: acceptedStatus(call.input) }));

  /** The start of `calls`, its spans continuing the first one's trace. */
  const prepare = (calls: BatchedCall[]) => {
    const [first] = calls as [BatchedCall];
    const requests = calls.map((c) => c.input);
    return starter.prepareStart(first.input.project, requests, first.trace);
  };

  /** Calls accepted per project and not started yet; past the cap, groups take the older path. */
  const unstarted = new Map<string, number>();
  const countUnstarted = (project: string, by: number) => {
    const count = (unstarted.get(project) ?? 0) + by;
    if (count > 0) unstarted.set(project, count);
    else unstarted.delete(project);
  };
  const accepting = (project: string) =>
    !startsFailing &&
    Date.now() >= acceptsPausedUntil &&
    (unstarted.get(project) ?? 0) < options.maxItems * UNSTARTED_GROUPS;

  /**
   * Accepted groups of a project, started together: those accepted while one start is in flight
   * go in the next, as one workflow (their kept starts all confirmed once it is made). A group
   * alone is started as it was kept. A start that fails leaves its groups to the sweep, and
   * the edge answers no call before its start until a start succeeds again.
   */
  const startTogether = grouped<AcceptedGroup, null>({
    maxItems: options.maxItems,
    fits: (gathered, group) =>
      callsOf(gathered) + group.calls.length <= options.maxItems &&
      charsOf(gathered) + charsOf([group]) <= BATCH_BODY_CHARS,
    async run(project, groups) {
      const calls = groups.flatMap((g) => g.calls);
      try {
        const freeSlot = await starter.admit(project);
        try {
          const [only] = groups;
          await (groups.length === 1 && only ? only.start : await prepare(calls)).send();
        } finally {
          freeSlot();
        }
        made = [...made, ...groups.map((g) => g.start.workflowId)].slice(-MAX_CONFIRMED);
        options.onStarted?.(calls.length);
      } catch (err) {
        startsFailing = true;
        options.logError({ err, project }, "accepted starts are left to the sweep");
      } finally {
        countUnstarted(project, -calls.length);
      }
      return groups.map(() => null);
    },
  });

  const together = grouped<BatchedCall, BatchAnswer>({
    maxItems: options.maxItems,
    fits: (gathered, call) => charsOf([{ calls: [...gathered, call] }]) <= BATCH_BODY_CHARS,
    async run(_, calls) {
      const [first] = calls as [BatchedCall];
      const { project } = first.input;
      const start = accepting(project) ? await prepare(calls) : null;
      const acceptance = start ? await accept(calls, start) : null;
      if (start && acceptance?.accepted) {
        countUnstarted(project, calls.length);
        void startTogether(project, { calls, start });
        return accepted(calls);
      }
      // The older path: reserved, started, then answered.
      const freeSlot = await starter.admit(project);
      try {
        const refusals = acceptance?.refusals ?? (await reserve(calls));
        const going = calls.filter((_, i) => !refusals[i]);
        if (going.length > 0) {
          const goingStart = start && going.length === calls.length ? start : await prepare(going);
          await goingStart.send().catch((error: unknown) => {
            release(going);
            throw error;
          });
          startsFailing = false;
          options.onStarted?.(going.length);
        }
        return calls.map((call, i) => {
          const refused = refusals[i];
          return refused ? { refused } : { accepted: acceptedStatus(call.input) };
        });
      } finally {
        freeSlot();
      }
    },
  });
  return (call) => together(`${call.input.project}/${call.reservation.pool}`, call);
}
