-- Ordered delivery's lanes (store/lanes.ts): per lane (an ordered endpoint's key) and async
-- target, the requests in the order they joined, each waiting for its turn. The queue lives here,
-- not in a workflow's state, so a key of any length the caps allow drains with bounded memory.
create table lane_entries (
  lane_id text not null,
  target_id text not null,
  seq bigint generated always as identity,
  -- The workflow that delivers it: the request's (a replay's workflow id is its own).
  request_id text not null,
  -- Its turn came: it may deliver (the lowest entry not done is the head and has it).
  turn boolean not null default false,
  -- Its workflow found it was not its turn and waits for a signal when it is.
  parked boolean not null default false,
  -- It left: delivered, failed for good, cancelled, or its workflow gone. Kept for the log's
  -- retention so a join repeated later (an Idempotency-Key's) joins nothing.
  done_at timestamptz,
  changed_at timestamptz not null default now(),
  primary key (lane_id, target_id, seq),
  unique (request_id, lane_id, target_id)
);
create index lane_entries_waiting on lane_entries (lane_id, target_id, seq) where done_at is null;
create index lane_entries_done on lane_entries (done_at) where done_at is not null;
