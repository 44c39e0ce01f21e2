-- Delivery control per target: its circuit (closed, open while it keeps failing, disabled once
-- open too long), a pause by hand, the deliveries waiting on either, and what happened to it.
-- Keyed by target id without a foreign key: an endpoint's edit re-creates its target rows under
-- the same ids, and a target's circuit, pause and waiting deliveries outlive that.
create table target_circuits (
  target_id text primary key,
  state text not null default 'closed' check (state in ('closed', 'open', 'disabled')),
  -- The current run of failed attempts, and when it began.
  failures integer not null default 0,
  failing_since timestamptz,
  opened_at timestamptz,
  paused_at timestamptz
);

-- Deliveries waiting for their target (open circuit, disabled, paused), oldest first.
create table held_deliveries (
  target_id text not null,
  workflow_id text not null,
  held_at timestamptz not null default now(),
  primary key (target_id, workflow_id)
);
create index held_deliveries_oldest on held_deliveries (target_id, held_at);

-- A target's circuit history, newest first in the panel.
create table circuit_events (
  id bigserial primary key,
  target_id text not null,
  event text not null,
  at timestamptz not null default now()
);
create index circuit_events_target on circuit_events (target_id, id desc);

alter table endpoints add column paused_at timestamptz;
alter table endpoints add column circuit_breaker jsonb;
