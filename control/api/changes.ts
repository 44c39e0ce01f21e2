/**
 * The change feed edges follow. Every write an edge must see (a key's state, a project's
 * routing) adds a row in the same transaction; edges stream the rows, acknowledge them, and hold
 * a lease while they do. A revocation returns once every edge with a live lease has acknowledged
 * it, or its lease has run out (and the edge has failed closed).
 */
import type { KeyRecord } from "../../core/model.ts";
import type { Queryable, Sql } from "../db/client.ts";

const CHANNEL = "relay_changes";
const HEARTBEAT_MS = 1000;
const BATCH = 500;

export type ChangeKind = "key" | "routing" | "clock";

/** Adds a change in the caller's transaction; NOTIFY wakes the streams once it commits. */
export async function recordChange(
  tx: Queryable,
  projectId: string,
  kind: ChangeKind,
  keyHash: Uint8Array | null = null,
): Promise<bigint> {
  const [row] = await tx<{ sequence: string }[]>`
    insert into changes (project, kind, key_hash)
    values (coalesce((select slug from projects where id = ${projectId}), ''), ${kind}, ${keyHash})
    returning sequence`;
  await tx`select pg_notify(${CHANNEL}, '')`;
  return BigInt(row?.sequence ?? 0);
}

export interface ChangeBatch {
  changes: (
    | { sequence: bigint; project: string; kind: "key"; key: KeyRecord & { keyHash: Uint8Array } }
    | { sequence: bigint; project: string; kind: "routing" }
  )[];
  headSequence: bigint;
}

/** Wakes every open stream of this process when any process records a change. */
export function changeNotifier(sql: Sql) {
  const waiters = new Set<() => void>();
  const listening = sql.listen(CHANNEL, () => {
    for (const wake of waiters) wake();
    waiters.clear();
  });
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
 * nothing happens for a second. Key changes carry the key's state as it is now.
 */
export async function* watchChanges(
  sql: Sql,
  notifier: ChangeNotifier,
  after: bigint,
  now: () => Date,
  signal: AbortSignal,
): AsyncGenerator<ChangeBatch> {
  let cursor = after;
  if (cursor < 0n) {
    const [head] = await sql<
      { head: string }[]
    >`select coalesce(max(sequence), 0) as head from changes`;
    cursor = BigInt(head?.head ?? 0);
  }
  while (!signal.aborted) {
    const woken = notifier.next(HEARTBEAT_MS, signal);
    const rows = await sql<
      { sequence: string; project: string; kind: ChangeKind; keyHash: Buffer | null }[]
    >`
      select sequence, project, kind, key_hash from changes
      where sequence > ${cursor.toString()} order by sequence limit ${BATCH}`;
    if (rows.length > 0) {
      const hashes = rows.flatMap((r) => (r.keyHash ? [r.keyHash] : []));
      const keys = await keysByHash(sql, hashes, now());
      // A clock change needs no entry: every batch states the clock's offset.
      const changes = rows.flatMap((row): ChangeBatch["changes"] => {
        const base = { sequence: BigInt(row.sequence), project: row.project };
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

/** The edge-facing view of keys, shared by ResolveKey and the change feed. */
export async function keysByHash(sql: Sql, hashes: Uint8Array[], now: Date) {
  const byHash = new Map<string, KeyRecord & { keyHash: Uint8Array }>();
  if (hashes.length === 0) return byHash;
  const rows = await sql<(KeyRecord & { keyHash: Buffer })[]>`
    select k.id, p.slug as project, k.mode, k.expires_at, k.revoked_at, k.key_hash,
      exists (select 1 from api_keys s where s.predecessor_id = k.id and s.revoked_at is null
        and (s.expires_at is null or s.expires_at > ${now})) as successor_usable
    from api_keys k join projects p on p.id = k.project_id
    where k.key_hash in ${sql(hashes.map((h) => Buffer.from(h)))}`;
  for (const row of rows) {
    byHash.set(row.keyHash.toString("hex"), { ...row, keyHash: new Uint8Array(row.keyHash) });
  }
  return byHash;
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
