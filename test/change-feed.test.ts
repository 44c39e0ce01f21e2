/**
 * The change feed edges follow: gap-free under concurrent writers (a change committed after a
 * later-numbered one is still sent, so a revocation always reaches the edges before DELETE
 * returns), and pruned without stranding an edge that comes back with an old cursor.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { freePorts } from "../dev/ports.ts";
import { connectControlPlane } from "../edge/control.ts";
import {
  type ChangeBatch,
  changeNotifier,
  pruneChanges,
  recordChange,
  watchChanges,
} from "../store/changes.ts";
import { connect } from "../store/db.ts";
import {
  api,
  eventually,
  extraEdge,
  mintKey,
  projectWithEndpoint,
  relay,
  stack,
  targetServer,
} from "./helpers.ts";

const sink = await targetServer();
const [secondEdgePort = 0] = await freePorts(1);
const secondEdge = extraEdge("edge-feed", secondEdgePort, {
  RELAY_EDGE_DOMAIN: `localhost:${stack().edgePort}`,
});
const edges = () => [
  { edgeUrl: stack().edgeUrl, edgePort: stack().edgePort },
  { edgeUrl: `http://127.0.0.1:${secondEdgePort}`, edgePort: secondEdgePort },
];
const sql = connect(stack().databaseUrl, { max: 4 });
beforeAll(() => secondEdge.start());
afterAll(async () => {
  await secondEdge.stop();
  await sink.close();
  await sql.end();
});

/** Resolves once some transaction waits for an advisory lock (polls pg_locks). */
async function someoneWaitsForTheFeedLock(): Promise<void> {
  for (;;) {
    const [waiting] = await sql`select 1 from pg_locks where locktype = 'advisory' and not granted`;
    if (waiting) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test("a change committed after a later-numbered one still reaches a reader that acked the later one", async () => {
  const notifier = changeNotifier(sql);
  await notifier.ready;
  const abort = new AbortController();
  // Transaction A takes its sequence number, then stays open.
  let commitA = () => {};
  const aMayCommit = new Promise<void>((resolve) => {
    commitA = resolve;
  });
  let tookNumber = (_: bigint) => {};
  const aSequence = new Promise<bigint>((resolve) => {
    tookNumber = resolve;
  });
  const a = sql.begin(async (tx) => {
    tookNumber(await recordChange(tx, "", "routing"));
    await aMayCommit;
  });
  const first = await aSequence;
  // Transaction B records a change after A's: it either commits at once or waits for A.
  const b = sql.begin((tx) => recordChange(tx, "", "routing"));
  await Promise.race([b, someoneWaitsForTheFeedLock()]);

  // A reader (an edge) takes a batch now, then A commits, then the reader goes on.
  const feed = watchChanges(sql, notifier, first - 1n, () => new Date(), abort.signal);
  const batches: ChangeBatch[] = [];
  const take = async () => {
    const next = await feed.next();
    if (!next.done) batches.push(next.value);
  };
  await take();
  commitA();
  await a;
  const second = await b;
  while ((batches.at(-1)?.headSequence ?? 0n) < second) await take();
  abort.abort();
  await feed.return(undefined);

  const sent = batches.flatMap((batch) => batch.changes.map((change) => change.sequence));
  expect(sent).toContain(first);
  expect(sent).toContain(second);
});

test("under concurrent writers in ten projects, every revoked key is refused by every edge when its DELETE returns", async () => {
  const projects = await Promise.all(
    Array.from({ length: 10 }, () => projectWithEndpoint([{ name: "sink", targetUrl: sink.url }])),
  );
  const keysOf = await Promise.all(
    projects.map(async (p) => {
      const listed = await api<{ keys: { id: string }[] }>(p.ownerToken, "GET", `${p.base}/keys`);
      const keys = [
        { id: listed.body.keys[0]?.id as string, plaintext: p.key },
        ...(await Promise.all(
          [1, 2].map(async () => {
            const minted = await api<{ key: { id: string }; plaintext: string }>(
              p.ownerToken,
              "POST",
              `${p.base}/keys`,
              { name: "k", mode: "live" },
            );
            return { id: minted.body.key.id, plaintext: minted.body.plaintext };
          }),
        )),
      ];
      // Every edge caches every key as active.
      for (const key of keys) {
        for (const edge of edges()) {
          const answer = await relay(p.slug, "/v1/hook", { key: key.plaintext, body: "{}", edge });
          expect(answer.status).toBe(202);
        }
      }
      return keys;
    }),
  );

  const refusals: string[] = [];
  await Promise.all(
    projects.flatMap((p, i) => [
      // Other writers in the same projects meanwhile: mints and endpoint edits.
      (async () => {
        for (let n = 0; n < 3; n++) {
          await mintKey(p, "test");
          const edited = await api(p.ownerToken, "PUT", `${p.base}/lines/v1/endpoints/hook`, {
            targets: [{ name: "sink", targetUrl: sink.url }],
          });
          expect(edited.status).toBe(200);
        }
      })(),
      (async () => {
        for (const key of keysOf[i] ?? []) {
          const revoked = await api(p.ownerToken, "DELETE", `${p.base}/keys/${key.id}`);
          expect(revoked.status).toBe(200);
          for (const edge of edges()) {
            const answer = await relay(p.slug, "/v1/hook", {
              key: key.plaintext,
              body: "{}",
              edge,
            });
            refusals.push(
              `${answer.status} ${answer.status === 202 ? "" : answer.json().error.code}`,
            );
          }
        }
      })(),
    ]),
  );
  expect(refusals).toEqual(Array(10 * 3 * 2).fill("401 key_revoked"));
});

test("pruning keeps what live edges still need; an edge back with a pruned cursor resyncs", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const listed = await api<{ keys: { id: string }[] }>(p.ownerToken, "GET", `${p.base}/keys`);
  const keyId = listed.body.keys[0]?.id;
  const control = connectControlPlane({
    baseUrl: stack().controlUrl,
    edgeToken: stack().edgeToken,
    fetch,
  });
  const firstBatch = async (after: bigint) => {
    const abort = new AbortController();
    for await (const batch of control.watch("feed-test-edge", after, abort.signal)) {
      abort.abort();
      return batch;
    }
    throw new Error("no batch");
  };
  // An edge that saw the head, then went away without a lease (so nothing waits for it).
  const cursor = (await firstBatch(-1n)).headSequence;
  expect((await api(p.ownerToken, "DELETE", `${p.base}/keys/${keyId}`)).status).toBe(200);
  await mintKey(p, "test");
  // A lease that ran out long ago, and the stack's own edges' live ones.
  await sql`
    insert into edge_leases (edge_id, acked_sequence, lease_expires_at)
    values ('feed-test-gone', 0, now() - interval '2 days')`;

  // Every live edge has acknowledged everything (the prune keeps each one's last).
  await eventually(async () => {
    const [behind] = await sql`
      select 1 from edge_leases
      where lease_expires_at > now()
        and acked_sequence < (select max(sequence) from changes)`;
    return !behind;
  });
  const pruned = await pruneChanges(sql, 0);
  expect(pruned.changes).toBeGreaterThan(0);
  expect(pruned.leases).toBeGreaterThanOrEqual(1);
  const [kept] = await sql<{ oldest: string; newest: string; live: number }[]>`
    select min(sequence) as oldest, max(sequence) as newest,
      (select count(*)::int from edge_leases where lease_expires_at > now()) as live
    from changes`;
  // Only the newest change stays; so do the live leases.
  expect(kept?.oldest).toBe(kept?.newest);
  expect(BigInt(kept?.oldest ?? 0)).toBeGreaterThan(cursor + 1n);
  expect(kept?.live).toBeGreaterThanOrEqual(2);

  // Back with the old cursor: the first batch carries the revocation and the project's routing.
  const resync = await firstBatch(cursor);
  expect(resync.headSequence).toBeGreaterThanOrEqual(BigInt(kept?.newest ?? 0));
  expect(resync.changes).toContainEqual(
    expect.objectContaining({
      project: p.slug,
      kind: "key",
      key: expect.objectContaining({ id: keyId, revokedAt: expect.any(Date) }),
    }),
  );
  expect(resync.changes).toContainEqual({ project: p.slug, kind: "routing" });

  // The stack's edges were never stranded: revoking now still reaches them before DELETE returns.
  const fresh = await api<{ key: { id: string }; plaintext: string }>(
    p.ownerToken,
    "POST",
    `${p.base}/keys`,
    { name: "fresh", mode: "live" },
  );
  const call = (edge: { edgeUrl: string; edgePort: number }) =>
    relay(p.slug, "/v1/hook", { key: fresh.body.plaintext, body: "{}", edge });
  for (const edge of edges()) expect((await call(edge)).status).toBe(202);
  await api(p.ownerToken, "DELETE", `${p.base}/keys/${fresh.body.key.id}`);
  for (const edge of edges()) expect((await call(edge)).json().error.code).toBe("key_revoked");
});
