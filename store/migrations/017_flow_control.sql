-- Flow control per target, and headers a target keeps out of the request log (issue 28).
alter table targets add column max_deliveries_per_second integer
  check (max_deliveries_per_second between 1 and 1000);
alter table targets add column max_concurrent integer check (max_concurrent between 1 and 1000);
-- Lowercase header names never kept in the request log (still forwarded).
alter table targets add column secret_headers jsonb not null default '[]';

-- A limited target's pace: the earliest time its next delivery may start (starts are spaced
-- 1/max_deliveries_per_second apart, so any one-second window holds at most the limit and one).
create table target_flow (
  target_id text primary key,
  next_start_at timestamptz not null default 'epoch'
);

-- A limited target's attempts in flight (started), and the deliveries its drain let go on their
-- way to their attempt (not started); one lost with its worker frees its place at expires_at.
create table flow_slots (
  target_id text not null,
  request_id text not null,
  started boolean not null default true,
  expires_at timestamptz not null,
  primary key (target_id, request_id)
);

-- Held deliveries drain in the order Relay accepted their requests, whenever each was held.
alter table held_deliveries add column accepted_at timestamptz not null default now();
create index held_deliveries_accepted on held_deliveries (target_id, accepted_at, held_at);
