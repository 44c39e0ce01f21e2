/**
 * Adaptive batching of immediate async calls (core/grouped.ts: group commit, by project and
 * pool). A workflow per request costs Temporal and the worker about 24 ms of CPU here; a
 * workflow carrying 32 requests about 1.7 ms each (docs/benchmarks.md, Batch probe). So calls
 * of a project that arrive while one of its groups is in flight go together next, in one batch
 * workflow (or their own, when alone).
 *
 * Accepted before started: a group's calls are reserved and their workflow's start kept in
 * Postgres in one control-plane call (`AcceptCalls`), and they are answered 202 once that
 * commits; the edge then makes the start, and confirms it with its next acceptance. A start it
 * never makes (it died, Temporal failed it) the control plane's sweep makes. So a caller does
 * not wait for Temporal's start (most of a 202's time), and Temporal being down for a moment
 * does not refuse calls. When a call of the group is refused, the control plane does not
 * answer, or this edge's last start failed, the group takes the older path: reserved, then
 * started, then answered (a failed start gives its reservations back and the callers 503).
 *
 * A batch at most half full waits briefly (RELAY_BATCH_LINGER_MS) for the calls gathering behind
 * it, which join it in their acceptance (./open-batches.ts): one workflow carries both groups.
 * A caller sending one call at a time goes alone: nothing of its project is in flight.
 * A body too large for the batch's input (`travelsInBatch`) goes by reference: stored in
 * Postgres in the acceptance's transaction, so it costs no round trip of its own. A call's
 * Idempotency-Key is claimed in that transaction too (store/idempotency.ts): a repeat is told
 * apart there, since a batch's workflow id is not its request's. An ordered call joins its lane in
 * that transaction too (store/lanes.ts), so its place is its accept order. A delayed call takes
 * its place among its project's waiting deliveries there too, and shares a batch only with calls
 * due in the same second, which its workflow waits for. A mirror's async targets come here too
 * (its credits held for its sync target as well), its sync target called once they are accepted
 * (edge/steps/deliver.ts); calls with a stream target never do, nor ordered calls with a delay,
 * nor delayed calls with a key.
 */
import type { CallsAccepted, ReservationRefusal } from "../core/billing.ts";
import { acceptedStatus } from "../core/delivery.ts";
import { type Behind, grouped } from "../core/grouped.ts";
import {
  answersAfterClaims,
  type Batch,
  type BatchAnswer,
  type BatchedCall,
  fitOneWorkflow,
  repeatsInGroup,
  storedBodiesOf,
  sumOf,
  zip,
} from "./batched-calls.ts";
import type { ControlPlane } from "./control.ts";
import { type OpenBatch, openBatches } from "./open-batches.ts";
import type { BatchStarter, PreparedStart } from "./temporal.ts";

export interface BatchOptions {
  /** Deliveries one batch carries at most (RELAY_BATCH_MAX_ITEMS). */
  maxItems: number;
  /**
   * How long a batch at most half full waits for the calls gathering behind it to join it
   * (RELAY_BATCH_LINGER_MS); 0: it never waits, nor is joined.
   */
  lingerMs: number;
  /**
   * Bytes of bodies stored by reference one group carries at most (RELAY_MAX_BODY_BYTES: an
   * acceptance's message takes one inbound body's size beside its start).
   */
  maxStoredBytes: number;
  /** Told how many calls each start carried once it was answered (a metric). */
  onStarted?: (requests: number) => void;
  logError: (fields: Record<string, unknown>, message: string) => void;
}

/**
 * Body bytes (base64) a request may bring into a batch (./batched-calls.ts: a batch in all): the
 * batch's input holds each body, and Temporal warns past 256 KiB a payload and refuses 2 MB.
 */
const BATCHABLE_BODY_CHARS = 16 * 1024;

/** Whether a body of `bodyBytes` travels in a batch's input; else by reference. */
export function travelsInBatch(bodyBytes: number): boolean {
  return Math.ceil(bodyBytes / 3) * 4 <= BATCHABLE_BODY_CHARS;
}

/** Starts an edge confirms at most in one acceptance; older ones are left to the sweep. */
const MAX_CONFIRMED = 1024;
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
    | "reserveDeliveries"
    | "reserveDeliveriesBatch"
    | "releaseDeliveries"
    | "acceptCalls"
    | "storeBody"
  >,
  options: BatchOptions,
): Batch {
  /** Workflows started since the last acceptance, which that one confirms. */
  let made: string[] = [];
  /** A start after its 202 failed: groups take the older path until a start succeeds again. */
  let startsFailing = false;
  /** An acceptance failed (Postgres down, say): groups take the older path until then. */
  let acceptsPausedUntil = 0;
  const accepting = () => !startsFailing && Date.now() >= acceptsPausedUntil;

  /**
   * The group reserved and its start kept (joining the one kept as `joins`), in one call. When not
   * accepted, `refusals` says which calls were refused, or null: no answer in time.
   */
  async function accept(
    calls: BatchedCall[],
    start: PreparedStart,
    joins: string | undefined,
  ): Promise<Omit<CallsAccepted, "refusals"> & { refusals: (ReservationRefusal | null)[] | null }> {
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
          bodies: storedBodiesOf(calls),
          claims: calls.flatMap(({ claim }) => (claim ? [claim] : [])),
          lanes: calls.flatMap(({ lane }) => (lane ? [lane] : [])),
          scheduled: calls.flatMap(({ input }) =>
            input.notBefore
              ? [{ requestId: input.requestId, notBefore: new Date(input.notBefore) }]
              : [],
          ),
          joins,
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

  /** Answered already: makes the start, and confirms it with the next acceptance. */
  async function startAccepted(start: PreparedStart, requests: number): Promise<void> {
    try {
      await start.send();
      made.push(start.workflowId);
      if (made.length > MAX_CONFIRMED) made.shift();
      options.onStarted?.(requests);
    } catch (err) {
      startsFailing = true;
      options.logError(
        { err, workflowId: start.workflowId },
        "an accepted start is left to the sweep",
      );
    }
  }

  /**
   * Each call's refusal, or null: the calls holding credits reserved per pool, in order; a
   * delayed one alone, as it takes its place among the waiting deliveries too.
   */
  async function reserve(calls: BatchedCall[]): Promise<(ReservationRefusal | null)[]> {
    const refusals: (ReservationRefusal | null)[] = calls.map(() => null);
    const delayed = (call: BatchedCall) => call.reservation.notBefore !== null;
    const holding = calls.flatMap((call, i) =>
      call.reservation.holds.length > 0 && !delayed(call) ? [i] : [],
    );
    await Promise.all(
      calls.map(async (call, i) => {
        if (!delayed(call)) return;
        refusals[i] = await control.reserveDeliveries(call.reservation).catch((err: unknown) => {
          options.logError({ err, project: call.reservation.project }, "no reservation");
          return null;
        });
      }),
    );
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
      // A delayed call's place goes back too.
      if (targetIds.length === 0 && !reservation.notBefore) continue;
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

  /**
   * Stores the bodies of calls going by reference, on the older path (a store replaces what an
   * acceptance may have stored); answers the calls whose body could not be stored.
   */
  async function storeBodies(calls: BatchedCall[]): Promise<Set<BatchedCall>> {
    const unstored = new Set<BatchedCall>();
    await Promise.all(
      calls.map(async (call) => {
        if (!call.storedBody) return;
        const { project, requestId } = call.input;
        await control.storeBody(project, requestId, call.storedBody).catch((err: unknown) => {
          options.logError({ err, requestId }, "a large body could not be stored");
          unstored.add(call);
        });
      }),
    );
    return unstored;
  }

  const accepted = (calls: BatchedCall[]): BatchAnswer[] =>
    calls.map((call) => ({ accepted: acceptedStatus(call.input) }));

  const storedBytes = (call: BatchedCall) => call.storedBody?.byteLength ?? 0;
  const oneWorkflow = (calls: readonly BatchedCall[]) => fitOneWorkflow(calls, options.maxItems);
  /** Makes a kept batch no group joins (any more), as it was kept. */
  const makeKept = (batch: OpenBatch) => {
    void startAccepted(batch.start, batch.calls.length);
  };
  const open = openBatches({ ...options, made: makeKept });

  const together = grouped<BatchedCall, BatchAnswer>({
    maxItems: options.maxItems,
    fits: (gathered, call) =>
      oneWorkflow([...gathered, call]) &&
      sumOf(gathered, storedBytes) + storedBytes(call) <= options.maxStoredBytes,
    async run(key, calls, answerNow, behind) {
      const [first] = calls as [BatchedCall];
      // A call repeating the key of one before it in the group is answered as that one is.
      const { firsts, answersOfAll } = repeatsInGroup(calls);
      // Taken before the slot's wait: the open batch would be made meanwhile.
      const joining = open.take(key, firsts, accepting());
      const freeSlot = await starter.admit(first.input.project).catch((error: unknown) => {
        if (joining) makeKept(joining);
        throw error;
      });
      try {
        const group = { key, joining, behind };
        const answers = await startGroup(firsts, (early) => answerNow(answersOfAll(early)), group);
        return answersOfAll(answers);
      } finally {
        freeSlot();
      }
    },
  });

  /**
   * Accepts and starts `calls`, answering them early (`answerNow`) once accepted; they join
   * `group.joining` when given. When keys of some were claimed before, the others are tried once
   * more (`retries`), then go alone.
   */
  async function startGroup(
    calls: BatchedCall[],
    answerNow: (answers: BatchAnswer[]) => void,
    group: GroupRun,
    retries = 1,
  ): Promise<BatchAnswer[]> {
    const [first] = calls as [BatchedCall];
    const prepare = (going: BatchedCall[]) =>
      starter.prepareStart(
        first.input.project,
        going.map((c) => c.input),
        // The batch's spans continue its first call's trace.
        (going[0] ?? first).trace,
      );
    const { joining } = group;
    const carried = [...(joining?.calls ?? []), ...calls];
    let start: PreparedStart | null;
    let acceptance: Awaited<ReturnType<typeof accept>> | null;
    try {
      start = accepting() ? await prepare(carried) : null;
      acceptance = start ? await accept(calls, start, joining?.start.workflowId) : null;
    } catch (error) {
      if (joining) makeKept(joining);
      throw error;
    }
    if (start && acceptance?.accepted) {
      answerNow(accepted(calls));
      const batch = { start, calls: carried };
      const { key, behind } = group;
      if (
        !(
          open.lingers(key, batch, behind) &&
          (await open.leftOpen(key, batch, calls.length, behind))
        )
      ) {
        await startAccepted(start, carried.length);
      }
      return accepted(calls);
    }
    // Not joined: the batch is made as it was kept, but for a join unanswered: committed after
    // all, its kept start carries these calls too, which the sweep makes and this would forget.
    if (joining && acceptance?.refusals !== null) makeKept(joining);
    // Keys claimed before: nothing was reserved or kept. The repeats are answered as their first
    // calls were; the others are accepted without them, or at last go alone.
    if (acceptance?.claims) {
      const { claims } = acceptance;
      const rest = calls.filter((_, i) => claims[i] === "claimed");
      const restAnswers =
        rest.length > 0 && retries > 0
          ? zip(
              rest,
              await startGroup(rest, () => {}, { ...group, joining: undefined }, retries - 1),
            )
          : [];
      return answersAfterClaims(calls, claims, new Map(restAnswers));
    }
    // The older path: reserved, started, then answered. A call with an Idempotency-Key, or an
    // ordered one, goes as a workflow of its own: its key is claimed, and its lane joined, here
    // only with a kept start.
    const goesAlone = (call: BatchedCall) => call.claim !== undefined || call.lane !== undefined;
    const older = calls.filter((call) => !goesAlone(call));
    const refusalOf = new Map(
      acceptance?.refusals
        ? calls.map((call, i) => [call, acceptance.refusals?.[i] ?? null])
        : zip(older, await reserve(older)),
    );
    const fitting = older.filter((call) => !refusalOf.get(call));
    // An acceptance that was answered stored the bodies; one that was not may not have.
    const unstored = acceptance?.refusals ? new Set() : await storeBodies(fitting);
    release(fitting.filter((call) => unstored.has(call)));
    const going = fitting.filter((call) => !unstored.has(call));
    if (going.length > 0) {
      // A joining start carries the batch's calls too: these go on in one of their own.
      const own = start && !joining && going.length === calls.length ? start : null;
      const goingStart = own ?? (await prepare(going));
      await goingStart.send().catch((error: unknown) => {
        release(going);
        throw error;
      });
      startsFailing = false;
      options.onStarted?.(going.length);
    }
    return calls.map((call): BatchAnswer => {
      const refused = refusalOf.get(call);
      if (refused) return { refused };
      if (goesAlone(call)) return { alone: true };
      return unstored.has(call) ? { unstored: true } : { accepted: acceptedStatus(call.input) };
    });
  }

  // A delayed call shares a batch with those due in the same second: the batch waits for the last.
  return (call) => {
    const { project, notBefore } = call.input;
    const due = notBefore ? Math.ceil(Date.parse(notBefore) / 1000) : "now";
    return together(`${project}/${call.reservation.pool}/${due}`, call);
  };
}

/** A group's run: its key, the open batch it joins, the calls gathering behind it. */
interface GroupRun {
  key: string;
  joining: OpenBatch | undefined;
  behind: Behind<BatchedCall>;
}
