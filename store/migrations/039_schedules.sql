-- Schedules (core/schedules.ts): a cron on an endpoint with the call each fire sends. Temporal's
-- Schedule of the same id keeps the time; this row keeps the call and how its last fire went.
create table schedules (
  id text primary key,
  project_id text not null references projects (id) on delete cascade,
  -- A deleted endpoint takes its schedules along (their Temporal Schedules delete themselves at
  -- their next fire, finding no row).
  endpoint_id text not null references endpoints (id) on delete cascade,
  cron text not null,
  time_zone text not null,
  -- The JSON body each fire sends, as text; null: none.
  body text,
  headers jsonb not null,
  mode text not null check (mode in ('live', 'test')),
  paused boolean not null default false,
  note text not null default '',
  fires integer not null default 0,
  last_fired_at timestamptz,
  -- The edge's answer to the last fire: its status and request id (null when it had none).
  last_status integer,
  last_request_id text,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);
create index schedules_project on schedules (project_id, created_at);
create index schedules_endpoint on schedules (endpoint_id);
