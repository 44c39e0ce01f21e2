-- Key rotation, auto-rotation's sealed successors, the change feed edges follow, edge leases,
-- and the dev clock.
drop index api_keys_one_successor;
create index api_keys_predecessor on api_keys (predecessor_id);
alter table api_keys
  add column auto_rotated boolean not null default false,
  -- AES-256-GCM of an auto-rotated successor's plaintext, destroyed at its one reveal.
  add column sealed_plaintext bytea,
  add column revealed_at timestamptz;

create table changes (
  sequence bigserial primary key,
  project text not null,
  kind text not null check (kind in ('key', 'routing', 'clock')),
  key_hash bytea,
  created_at timestamptz not null default now()
);

create table edge_leases (
  edge_id text primary key,
  acked_sequence bigint not null,
  lease_expires_at timestamptz not null
);

-- One row: how far the dev clock is ahead of real time (RELAY_DEV_CLOCK=1 only).
create table dev_clock (
  id boolean primary key default true check (id),
  offset_ms bigint not null default 0
);
insert into dev_clock default values;
