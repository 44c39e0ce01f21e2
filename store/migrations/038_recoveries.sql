-- Recovery jobs (core/recoveries.ts): a replay of many finished requests by filter, run by a
-- workflow that walks the matches oldest first and keeps its place here, so a step taken twice
-- (an activity retried) starts nothing twice.
create table recoveries (
  id text primary key,
  project_id text not null references projects (id) on delete cascade,
  filter jsonb not null,
  state text not null check (state in ('running', 'completed', 'cancelled', 'failed')),
  -- Why a failed job stopped (its credits ran out); null otherwise.
  error text,
  matched integer not null,
  credits bigint not null,
  -- The last match the job took up, (received_at, id): where its next step reads on from.
  cursor_received_at timestamptz,
  cursor_id text,
  -- Every match was taken up: the job ends when its replays have.
  exhausted boolean not null default false,
  sent integer not null default 0,
  failed integer not null default 0,
  skipped integer not null default 0,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  finished_at timestamptz
);
create index recoveries_project on recoveries (project_id, created_at desc);

-- Each request a job replayed, the replay's number, and how it ended (null while it runs).
-- `started`: its workflow's start was made (a step that died between the replay's commit and
-- its start leaves it false, and a later step makes the start).
create table recovery_replays (
  recovery_id text not null references recoveries (id) on delete cascade,
  request_id text not null references requests (id) on delete cascade,
  replay integer not null,
  -- The request's status before its replay began: what it goes back to if its start is lost.
  was text not null default 'failed',
  taken_at timestamptz not null default now(),
  started boolean not null default false,
  outcome text check (outcome in ('sent', 'failed')),
  primary key (recovery_id, request_id)
);
create index recovery_replays_running on recovery_replays (recovery_id) where outcome is null;
