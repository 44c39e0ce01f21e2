-- Immediate async calls are accepted (202) once their reservation commits, before Temporal has
-- their workflow (issue 27): the workflow's start waits here, in the same transaction, until the
-- edge that accepted them confirms it made the start. A start still here at `due_at` (its edge
-- died, Temporal was down) is made by the control plane's sweep (store/accepted-starts.ts).
create table accepted_starts (
  workflow_id text primary key,
  project_id text not null,
  -- The requests it delivers, so a read by id finds one accepted but not started yet.
  request_ids text[] not null,
  -- Temporal's HTTP API start request (JSON, the input sealed by the payload codec).
  start bytea not null,
  accepted_at timestamptz not null default now(),
  due_at timestamptz not null
);
create index accepted_starts_due on accepted_starts (due_at);
