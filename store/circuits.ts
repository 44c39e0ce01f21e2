/**
 * Each target's circuit and pause (migration 010; the rules are in core/circuit.ts; its waiting
 * deliveries are store/held.ts). A target's `target_circuits` row is its lock: whoever holds a
 * delivery, lets deliveries go, or moves the circuit takes it first, so a delivery never waits
 * on a target that was let go a moment before. Edges learn which targets hold, since a call to
 * one takes its place under its project's cap on waiting deliveries as it is accepted.
 */
import {
  type CircuitMove,
  type CircuitOutcome,
  type CircuitRun,
  circuitAfter,
  defaultCircuitBreaker,
  type Hold,
  holdOf,
  type TargetGateState,
} from "../core/circuit.ts";
import { type FlowLimits, flowLimitsOf } from "../core/flow.ts";
import type { CircuitBreaker } from "../core/model.ts";
import { recordChange } from "./changes.ts";
import type { Queryable, Sql } from "./db.ts";

/** A target's circuit history is kept this long, newest first. */
const EVENTS_KEPT = 50;

export type CircuitEvent =
  | "opened"
  | "probe_failed"
  | "recovered"
  | "disabled"
  | "enabled"
  | "paused"
  | "resumed";

/**
 * A target's gate (`TargetGateState`) as columns, from `t` (targets), `e` (its endpoint) and `c`
 * (its circuit row, when any).
 */
export const gateColumns = (q: Queryable) => q`
  coalesce(c.state, 'closed') as state, c.paused_at is not null as target_paused,
  e.paused_at is not null as endpoint_paused`;

/** A target's gate, and its flow limits (core/flow.ts). */
type Gate = TargetGateState & {
  limited: boolean;
  maxDeliveriesPerSecond: number | null;
  maxConcurrent: number | null;
};

const gateOf = (q: Queryable, targetId: string, lock: boolean) => q<Gate[]>`
  select ${gateColumns(q)}, t.max_deliveries_per_second, t.max_concurrent,
    t.max_deliveries_per_second is not null or t.max_concurrent is not null as limited
  from targets t join endpoints e on e.id = t.endpoint_id
    ${lock ? q`join` : q`left join`} target_circuits c on c.target_id = t.id
  where t.id = ${targetId}
  ${lock ? q`for update of c` : q``}`;

/** What holds a target's deliveries now; null when they may go (or the target is gone). */
export async function targetHold(sql: Sql, targetId: string): Promise<Hold | null> {
  const [gate] = await gateOf(sql, targetId, false);
  return gate ? holdOf(gate) : null;
}

/** Takes the target's lock row (made when missing), in the caller's transaction. */
export async function lockTarget(tx: Queryable, targetId: string): Promise<Gate | undefined> {
  await tx`
    insert into target_circuits (target_id) select id from targets where id = ${targetId}
    on conflict do nothing`;
  const [gate] = await gateOf(tx, targetId, true);
  return gate;
}

async function recordEvent(tx: Queryable, targetId: string, event: CircuitEvent): Promise<void> {
  await tx`insert into circuit_events (target_id, event) values (${targetId}, ${event})`;
  await tx`
    delete from circuit_events where target_id = ${targetId} and id < (
      select id from circuit_events where target_id = ${targetId}
      order by id desc offset ${EVENTS_KEPT - 1} limit 1)`;
}

/** Of these targets (or a project's), the ones whose deliveries are held now. */
async function heldAmong(
  q: Queryable,
  of: { targetIds: readonly string[] } | { projectId: string },
): Promise<string[]> {
  const rows = await q<(TargetGateState & { id: string })[]>`
    select t.id, ${gateColumns(q)}
    from targets t join endpoints e on e.id = t.endpoint_id
      left join target_circuits c on c.target_id = t.id
    where ${"projectId" in of ? q`e.project_id = ${of.projectId}` : q`t.id = any(${of.targetIds}::text[])`}
      and (e.paused_at is not null or c.paused_at is not null or c.state <> 'closed')`;
  return rows.filter((row) => holdOf(row) !== null).map((row) => row.id);
}

/** A project's targets whose deliveries are held now (paused, their circuit open or disabled). */
export function heldTargetIds(q: Queryable, projectId: string): Promise<string[]> {
  return heldAmong(q, { projectId });
}

/**
 * Targets whose deliveries began or ceased to be held: the edges learn it, and the places calls
 * took for the ones let go are given back, as those calls go on rather than wait. The
 * transaction's last writes (store/changes.ts).
 */
export async function targetsMoved(tx: Queryable, targetIds: readonly string[]): Promise<void> {
  if (targetIds.length === 0) return;
  const held = new Set(await heldAmong(tx, { targetIds }));
  const letGo = targetIds.filter((id) => !held.has(id));
  if (letGo.length > 0) {
    await tx`delete from held_places where target_id = any(${letGo}::text[])`;
  }
  const projects = await tx<{ projectId: string }[]>`
    select distinct e.project_id from targets t join endpoints e on e.id = t.endpoint_id
    where t.id = any(${targetIds}::text[]) order by e.project_id`;
  for (const { projectId } of projects) await recordChange(tx, projectId, "routing");
}

/** An open circuit's state, as its workflow reads it each round. */
export interface CircuitState {
  hold: Hold | null;
  /** In ms since the epoch: a workflow's activity results travel as JSON. */
  openedAtMs: number | null;
  breaker: CircuitBreaker;
  waiting: number;
  /** The target's flow limits, when it has any (core/flow.ts). */
  flow: FlowLimits | null;
  /** False once the target's endpoint (or the target) is deleted. */
  exists: boolean;
  /** Where the target is, for the events its circuit raises. */
  target: { project: string; line: string; endpoint: string; name: string } | null;
}

export async function circuitState(sql: Sql, targetId: string): Promise<CircuitState> {
  const [row] = await sql<
    (TargetGateState & {
      openedAt: Date | null;
      breaker: CircuitBreaker | null;
      waiting: number;
      project: string;
      line: string;
      endpoint: string;
      name: string;
      maxDeliveriesPerSecond: number | null;
      maxConcurrent: number | null;
    })[]
  >`
    select ${gateColumns(sql)}, c.opened_at, e.circuit_breaker as breaker,
      t.max_deliveries_per_second, t.max_concurrent,
      (select count(*)::int from held_deliveries h where h.target_id = t.id) as waiting,
      p.slug as project, e.line_key as line, e.path as endpoint, t.name
    from targets t join endpoints e on e.id = t.endpoint_id
      join projects p on p.id = e.project_id
      left join target_circuits c on c.target_id = t.id
    where t.id = ${targetId}`;
  return {
    hold: row ? holdOf(row) : null,
    openedAtMs: row?.openedAt?.getTime() ?? null,
    flow: row ? flowLimitsOf(row) : null,
    breaker: row?.breaker ?? defaultCircuitBreaker,
    waiting: row?.waiting ?? 0,
    exists: row !== undefined,
    target: row
      ? { project: row.project, line: row.line, endpoint: row.endpoint, name: row.name }
      : null,
  };
}

/**
 * Moves the circuits of `targetIds` (sorted, their rows locked: `lockCircuits`) by their
 * attempts' outcomes, each target's in order (core/circuit.ts `circuitAfter`), in the caller's
 * transaction: each circuit read and written once, whatever the number of outcomes. Answers each
 * outcome's move, in the order given.
 */
export async function moveCircuitsBy(
  tx: Queryable,
  targetIds: readonly string[],
  outcomes: readonly { targetId: string; outcome: CircuitOutcome; at: Date }[],
): Promise<CircuitMove[]> {
  await tx`
    insert into target_circuits (target_id)
    select id from unnest(${targetIds}::text[]) as t (id) order by id
    on conflict do nothing`;
  const [runs, breakers] = await Promise.all([
    tx<(CircuitRun & { targetId: string })[]>`
      select target_id, state, failures, failing_since, opened_at from target_circuits
      where target_id = any(${targetIds}::text[])`,
    tx<{ id: string; breaker: CircuitBreaker | null }[]>`
      select t.id, e.circuit_breaker as breaker from targets t
        join endpoints e on e.id = t.endpoint_id
      where t.id = any(${targetIds}::text[])`,
  ]);
  const moved: CircuitMove[] = outcomes.map(() => null);
  const after: (CircuitRun & { targetId: string })[] = [];
  for (const targetId of targetIds) {
    const run = runs.find((r) => r.targetId === targetId);
    if (!run) continue;
    const breaker = breakers.find((b) => b.id === targetId)?.breaker ?? defaultCircuitBreaker;
    const mine = outcomes.flatMap((o, i) => (o.targetId === targetId ? [i] : []));
    const moves = circuitAfter(
      run,
      breaker,
      mine.map((i) => outcomes[i] as (typeof outcomes)[number]),
    );
    for (const [k, i] of mine.entries()) moved[i] = moves.moved[k] ?? null;
    after.push({ ...moves.run, targetId });
  }
  await tx`
    update target_circuits c set state = r.state, failures = r.failures,
      failing_since = r.failing_since, opened_at = r.opened_at
    from unnest(${after.map((r) => r.targetId)}::text[], ${after.map((r) => r.state)}::text[],
      ${after.map((r) => r.failures)}::int[],
      ${after.map((r) => r.failingSince?.toISOString() ?? null)}::timestamptz[],
      ${after.map((r) => r.openedAt?.toISOString() ?? null)}::timestamptz[])
      as r (target_id, state, failures, failing_since, opened_at)
    where c.target_id = r.target_id`;
  for (const [i, move] of moved.entries()) {
    const { targetId } = outcomes[i] as (typeof outcomes)[number];
    if (move) await recordEvent(tx, targetId, move);
  }
  return moved;
}

/** Locks the circuit rows of `targetIds` (sorted), so the moves that follow take no other order. */
export async function lockCircuits(tx: Queryable, targetIds: readonly string[]): Promise<void> {
  await tx`
    select 1 from target_circuits where target_id = any(${targetIds}::text[])
    order by target_id for update`;
}

/**
 * Delivered attempts at `targetIds` (sorted): each one's failure run ends and an open circuit
 * closes, in one statement. Answers the targets whose circuit was open, each with its event.
 */
export async function recordSuccesses(
  tx: Queryable,
  targetIds: readonly string[],
): Promise<string[]> {
  if (targetIds.length === 0) return [];
  const closed = await tx<{ targetId: string; wasOpen: boolean }[]>`
    update target_circuits c set failures = 0, failing_since = null,
      state = case when c.state = 'open' then 'closed' else c.state end,
      opened_at = case when c.state = 'open' then null else c.opened_at end
    from (
      select target_id, state from target_circuits where target_id = any(${targetIds}::text[])
      order by target_id for update
    ) before
    where c.target_id = before.target_id and (c.failures > 0 or c.state = 'open')
    returning c.target_id, before.state = 'open' as was_open`;
  const recovered = closed.filter((row) => row.wasOpen);
  for (const { targetId } of recovered) await recordEvent(tx, targetId, "recovered");
  return recovered.map((row) => row.targetId);
}

/** A failed probe, for the circuit's history. */
export async function recordProbeFailed(sql: Sql, targetId: string): Promise<void> {
  await recordEvent(sql, targetId, "probe_failed");
}

/** Disables a target whose circuit is still open; false when it closed meanwhile. */
export function disableTarget(sql: Sql, targetId: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    const gate = await lockTarget(tx, targetId);
    if (gate?.state !== "open") return false;
    await tx`update target_circuits set state = 'disabled' where target_id = ${targetId}`;
    await recordEvent(tx, targetId, "disabled");
    return true;
  });
}

/** A member's word: closes a disabled (or open) circuit; false when it was closed already. */
export function enableTarget(sql: Sql, targetId: string): Promise<boolean> {
  return sql.begin(async (tx) => {
    const gate = await lockTarget(tx, targetId);
    if (!gate || gate.state === "closed") return false;
    await tx`
      update target_circuits set state = 'closed', failures = 0, failing_since = null,
        opened_at = null
      where target_id = ${targetId}`;
    await recordEvent(tx, targetId, "enabled");
    await targetsMoved(tx, [targetId]);
    return true;
  });
}

/** Pauses or resumes one target; false when it already was so. */
export function pauseTarget(sql: Sql, targetId: string, paused: boolean): Promise<boolean> {
  return sql.begin(async (tx) => {
    const gate = await lockTarget(tx, targetId);
    if (!gate || gate.targetPaused === paused) return false;
    await tx`
      update target_circuits set paused_at = ${paused ? tx`now()` : null}
      where target_id = ${targetId}`;
    await recordEvent(tx, targetId, paused ? "paused" : "resumed");
    await targetsMoved(tx, [targetId]);
    return true;
  });
}

/** Pauses or resumes a whole endpoint; answers its targets' ids, or null when it already was so. */
export function pauseEndpoint(
  sql: Sql,
  endpointId: string,
  paused: boolean,
): Promise<string[] | null> {
  return sql.begin(async (tx) => {
    const [changed] = await tx`
      update endpoints set paused_at = ${paused ? tx`now()` : null}
      where id = ${endpointId} and (paused_at is null) = ${paused}
      returning id`;
    if (!changed) return null;
    const targets = await tx<{ id: string }[]>`
      select id from targets where endpoint_id = ${endpointId} order by position`;
    for (const { id } of targets) await recordEvent(tx, id, paused ? "paused" : "resumed");
    await targetsMoved(
      tx,
      targets.map((t) => t.id),
    );
    return targets.map((t) => t.id);
  });
}

/** A target's circuit as members see it. */
export interface CircuitView {
  targetId: string;
  targetName: string;
  state: "closed" | "open" | "disabled";
  /** The target paused by hand. */
  paused: boolean;
  /** Its whole endpoint paused by hand (each lifts only with its own resume). */
  endpointPaused: boolean;
  failures: number;
  openedAt: Date | null;
  /** Deliveries waiting for it. */
  waiting: number;
  events: { event: CircuitEvent; at: Date }[];
}

/** The circuits of an endpoint's targets, in the targets' order. */
export async function circuitsOf(sql: Sql, endpointId: string): Promise<CircuitView[]> {
  const rows = await sql<(Omit<CircuitView, "events"> & { events: CircuitView["events"] })[]>`
    select t.id as target_id, t.name as target_name, coalesce(c.state, 'closed') as state,
      c.paused_at is not null as paused, e.paused_at is not null as endpoint_paused,
      coalesce(c.failures, 0) as failures, c.opened_at,
      (select count(*)::int from held_deliveries h where h.target_id = t.id) as waiting,
      coalesce((select json_agg(json_build_object('event', v.event, 'at', v.at) order by v.id desc)
        from (select * from circuit_events where target_id = t.id order by id desc limit 10) v),
        '[]') as events
    from targets t join endpoints e on e.id = t.endpoint_id
      left join target_circuits c on c.target_id = t.id
    where t.endpoint_id = ${endpointId}
    order by t.position`;
  return rows.map((row) => ({
    ...row,
    events: row.events.map((e) => ({ event: e.event, at: new Date(e.at) })),
  }));
}

/** Forgets the circuits of targets that are gone (their endpoint deleted or edited without them). */
export async function forgetTargets(tx: Queryable, targetIds: string[]): Promise<void> {
  if (targetIds.length === 0) return;
  await tx`delete from target_circuits where target_id in ${tx(targetIds)}`;
  await tx`delete from circuit_events where target_id in ${tx(targetIds)}`;
}
