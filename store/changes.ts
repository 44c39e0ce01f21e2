/**
 * The change feed edges follow. Every write an edge must see (a key's state, one endpoint, a
 * project's routing as a whole) adds a row in the same transaction; edges stream the rows, acknowledge them, and hold
 * a lease while they do. A revocation returns once every edge with a live lease has acknowledged
 * it, or its lease has run out (and the edge has failed closed).
 *
 * The feed is gap-free: rows become visible in sequence order (see recordChange), so a reader
 * that has seen sequence n has seen everything below it. Old rows are pruned; an edge that comes
 * back with a cursor from before the prune gets the whole state again instead.
 */
import type { KeyRecord } from "../core/model.ts";
import type { Queryable, Sql } from "./db.ts";
import { pruneRateDemand } from "./rate-demand.ts";

const CHANNEL = "relay_changes";
const HEARTBEAT_MS = 1000;
const BATCH = 500;
/** The advisory lock that orders the feed's writers (any constant). */
const FEED_LOCK = 7_243_002;
/** How long changes and lapsed leases are kept; an edge away longer resyncs. */
export const CHANGE_RETENTION_MS = 24 * 60 * 60 * 1000;
const PRUNE_EVERY_MS = 60 * 60 * 1000;

export type ChangeKind = "key" | "routing" | "clock";

/**
 * Adds a change in the caller's transaction; NOTIFY wakes the streams once it commits.
 *
 * Writers take turns from their first change to their commit (a transaction-scoped lock), so
 * sequence order is commit order. Without it a transaction could take n, another take n + 1 and
 * commit first; a reader would see n + 1, move its cursor past n, and never send n (a
 * revocation lost, and DELETE's wait satisfied by the later ack). Call it as the transaction's
 * last writes: the lock is held until commit, so nothing after it may wait on another writer.
 */
export function recordChange(
  tx: Queryable,
  projectId: string,
  kind: ChangeKind,
  keyHash: Uint8Array | null = null,
): Promise<bigint> {
  return insertChange(tx, projectId, kind, keyHash, null);
}

/**
 * A change to the endpoint at `line/path` alone (created, edited, deleted, its signing secrets
 * rotated): edges refetch that endpoint, not the project. As recordChange, the transaction's
 * last writes.
 */
export function recordEndpointChange(
  tx: Queryable,
  projectId: string,
  line: string,
  path: string,
): Promise<bigint> {
  return insertChange(tx, projectId, "routing", null, { line, path });
}

/**
 * A project deleted (its rows gone in this transaction): edges drop all they keep of it, its
 * keys too. As recordChange, the transaction's last writes.
 */
export function recordProjectDeleted(tx: Queryable, slug: string): Promise<bigint> {
  return insertChange(tx, { slug }, "routing", null, null);
}

async function insertChange(
  tx: Queryable,
  project: string | { slug: string },
  kind: ChangeKind,
  keyHash: Uint8Array | null,
  endpoint: EndpointRef | null,
): Promise<bigint> {
  await tx`select pg_advisory_xact_lock(${FEED_LOCK})`;
  const slug =
    typeof project === "string"
      ? tx`coalesce((select slug from projects where id = ${project}), '')`
      : tx`${project.slug}`;
  const [row] = await tx<{ sequence: string }[]>`
    insert into changes (project, kind, key_hash, line_key, endpoint_path)
    values (${slug}, ${kind}, ${keyHash}, ${endpoint?.line ?? null}, ${endpoint?.path ?? null})
    returning sequence`;
  await tx`select pg_notify(${CHANNEL}, '')`;
  return BigInt(row?.sequence ?? 0);
}

/** An endpoint by its line and path. */
export interface EndpointRef {
  line: string;
  path: string;
}

export interface ChangeBatch {
  changes: (
    | { sequence: bigint; project: string; kind: "key"; key: KeyRecord & { keyHash: Uint8Array } }
    | { sequence: bigint; project: string; kind: "routing" }
    | { sequence: bigint; project: string; kind: "endpoint"; endpoint: EndpointRef }
  )[];
  headSequence: bigint;
}

/**
 * Wakes every open stream of this process when any process records a change, and prunes the
 * feed and the edges' rate demand hourly (every control plane does; the prunes are idempotent).
 */
export function changeNotifier(sql: Sql) {
  const waiters = new Set<() => void>();
  const listening = sql.listen(CHANNEL, () => {
    for (const wake of waiters) wake();
    waiters.clear();
  });
  const pruning = setInterval(() => {
    Promise.all([
      pruneChanges(sql, CHANGE_RETENTION_MS),
      pruneRateDemand(sql, PRUNE_EVERY_MS),
    ]).catch(() => {
      // The next hour's prune takes what this one left.
    });
  }, PRUNE_EVERY_MS);
  pruning.unref();
  return {
    ready: listening,
    /** Resolves at the next change or after `ms`, whichever is first. */
    next(ms: number, signal: AbortSignal): Promise<void> {
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          waiters.delete(done);
          signal.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        waiters.add(done);
        signal.addEventListener("abort", done);
      });
    },
  };
}

export type ChangeNotifier = ReturnType<typeof changeNotifier>;

/**
 * Batches of changes after `after` (-1: from the current head), then a heartbeat whenever
 * nothing happens for a second. Key changes carry the key's state as it is now. A cursor from
 * before the last prune first gets a resync: every project and every key, as they are now.
 */
export async function* watchChanges(
  sql: Sql,
  notifier: ChangeNotifier,
  after: bigint,
  now: () => Date,
  signal: AbortSignal,
): AsyncGenerator<ChangeBatch> {
  let cursor = after < 0n ? await headSequence(sql) : after;
  while (!signal.aborted) {
    const woken = notifier.next(HEARTBEAT_MS, signal);
    const rows = await sql<
      {
        sequence: string;
        project: string;
        kind: ChangeKind;
        keyHash: Buffer | null;
        lineKey: string | null;
        endpointPath: string | null;
      }[]
    >`
      select sequence, project, kind, key_hash, line_key, endpoint_path from changes
      where sequence > ${cursor.toString()} order by sequence limit ${BATCH}`;
    // Checked after the read: rows pruned before it show here (rows are only ever deleted, and
    // none can appear below the cursor), so a batch is never sent over a hole.
    if (await prunedPast(sql, cursor)) {
      const resync = await wholeState(sql, now());
      cursor = resync.headSequence;
      yield resync;
      continue;
    }
    if (rows.length > 0) {
      const hashes = rows.flatMap((r) => (r.keyHash ? [r.keyHash] : []));
      const keys = await keysByHash(sql, hashes, now());
      // A clock change needs no entry: every batch states the clock's offset.
      const changes = rows.flatMap((row): ChangeBatch["changes"] => {
        const base = { sequence: BigInt(row.sequence), project: row.project };
        if (row.kind === "routing" && row.lineKey !== null && row.endpointPath !== null) {
          const endpoint = { line: row.lineKey, path: row.endpointPath };
          return [{ ...base, kind: "endpoint", endpoint }];
        }
        if (row.kind === "routing") return [{ ...base, kind: "routing" }];
        const key = row.keyHash && keys.get(row.keyHash.toString("hex"));
        return key ? [{ ...base, kind: "key", key }] : [];
      });
      cursor = BigInt(rows.at(-1)?.sequence ?? cursor);
      yield { changes, headSequence: cursor };
      if (rows.length === BATCH) continue;
    } else {
      yield { changes: [], headSequence: cursor };
    }
    await woken;
  }
}

async function headSequence(sql: Sql): Promise<bigint> {
  const [head] = await sql<{ head: string }[]>`
    select coalesce(max(sequence), 0) as head from changes`;
  return BigInt(head?.head ?? 0);
}

/**
 * Whether changes after `cursor` were pruned. Pruning keeps the newest row, so the oldest row
 * left marks how far it went. (A sequence number taken by a transaction that rolled back can
 * leave a gap that looks like a prune: a needless resync, never a missed change.)
 */
async function prunedPast(sql: Sql, cursor: bigint): Promise<boolean> {
  const [oldest] = await sql<{ sequence: string | null }[]>`
    select min(sequence) as sequence from changes`;
  return oldest?.sequence != null && cursor < BigInt(oldest.sequence) - 1n;
}

/**
 * Every project's routing and every key, in one batch, for an edge whose cursor was pruned: its
 * cache may hold anything, and it serves from it again as soon as it acknowledges a batch, so
 * the whole state comes at once. The head is read first, so the state is at least that new.
 */
async function wholeState(sql: Sql, now: Date): Promise<ChangeBatch> {
  const head = await headSequence(sql);
  const projects = await sql<{ slug: string }[]>`select slug from projects`;
  const keys = await edgeKeys(sql, now, null);
  return {
    changes: [
      ...projects.map((p) => ({ sequence: head, project: p.slug, kind: "routing" as const })),
      ...[...keys.values()].map((key) => ({
        sequence: head,
        project: key.project,
        kind: "key" as const,
        key,
      })),
    ],
    headSequence: head,
  };
}

/** The edge-facing view of keys, shared by ResolveKey and the change feed. */
export function keysByHash(sql: Sql, hashes: Uint8Array[], now: Date) {
  return edgeKeys(sql, now, hashes);
}

/** Keys by hex hash: those with these hashes, or every key (null). */
async function edgeKeys(sql: Sql, now: Date, hashes: Uint8Array[] | null) {
  const byHash = new Map<string, KeyRecord & { keyHash: Uint8Array }>();
  if (hashes?.length === 0) return byHash;
  const rows = await sql<(KeyRecord & { keyHash: Buffer })[]>`
    select k.id, p.slug as project, k.mode, k.expires_at, k.revoked_at, k.key_hash,
      exists (select 1 from api_keys s where s.predecessor_id = k.id and s.revoked_at is null
        and (s.expires_at is null or s.expires_at > ${now})) as successor_usable
    from api_keys k join projects p on p.id = k.project_id
    ${hashes ? sql`where k.key_hash in ${sql(hashes.map((h) => Buffer.from(h)))}` : sql``}`;
  for (const row of rows) {
    byHash.set(row.keyHash.toString("hex"), { ...row, keyHash: new Uint8Array(row.keyHash) });
  }
  return byHash;
}

/**
 * Deletes changes older than `retentionMs` below every live lease's acknowledged sequence, and
 * leases that ran out longer ago. The newest change stays (it marks how far the prune went), and
 * so does each live edge's last acknowledged one, so no live edge's cursor looks pruned.
 */
export async function pruneChanges(
  sql: Sql,
  retentionMs: number,
): Promise<{ changes: number; leases: number }> {
  const changes = await sql`
    delete from changes
    where created_at < now() - ${retentionMs} * interval '1 millisecond'
      and sequence < least(
        (select max(sequence) from changes),
        (select min(acked_sequence) from edge_leases where lease_expires_at > now()))`;
  const leases = await sql`
    delete from edge_leases
    where lease_expires_at < now() - ${retentionMs} * interval '1 millisecond'`;
  return { changes: changes.count, leases: leases.count };
}

/** The longest lease an edge may claim, and so the longest a revocation can wait. */
export const MAX_LEASE_MS = 60_000;

/** Records that `edgeId` applied everything up to `sequence`, and renews its lease. */
export async function ackChanges(sql: Sql, edgeId: string, sequence: bigint, leaseMs: number) {
  await sql`
    insert into edge_leases (edge_id, acked_sequence, lease_expires_at)
    values (${edgeId}, ${sequence.toString()}, now() + ${leaseMs} * interval '1 millisecond')
    on conflict (edge_id) do update set
      acked_sequence = greatest(edge_leases.acked_sequence, excluded.acked_sequence),
      lease_expires_at = excluded.lease_expires_at`;
}

/**
 * Waits, as `waitForEdges`, for the feed's head as it is now: a write committed before this is
 * then in every live edge (a member's next call sees what the API just answered).
 */
export async function waitForEdgesToCatchUp(sql: Sql): Promise<void> {
  const [head] = await sql<{ sequence: string | null }[]>`
    select max(sequence)::text as sequence from changes`;
  if (head?.sequence) await waitForEdges(sql, BigInt(head.sequence));
}

/**
 * Waits until no edge holds a live lease without having acknowledged `sequence`. Every lease
 * runs out within its edge's lease time, so this ends within the longest of them.
 */
export async function waitForEdges(sql: Sql, sequence: bigint): Promise<void> {
  const deadline = Date.now() + MAX_LEASE_MS + 1000;
  while (Date.now() < deadline) {
    const [pending] = await sql<{ count: number }[]>`
      select count(*)::int as count from edge_leases
      where lease_expires_at > now() and acked_sequence < ${sequence.toString()}`;
    if (!pending?.count) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
