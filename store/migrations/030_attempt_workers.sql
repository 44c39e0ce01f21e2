-- Which worker process made each attempt, and when each one was last seen (store/workers.ts): a
-- first attempt run again on another worker (its workflow task timed out while the first run was
-- still at the target) waits for the attempt a live worker still has in flight, rather than call
-- the target a second time with no cause (workflows/deliveries.ts `rerunVerdict`).
alter table attempts add column worker_id text;
create table workers (
  id text primary key,
  seen_at timestamptz not null
);
