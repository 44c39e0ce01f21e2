-- Idempotency-Keys of calls to async-only, unordered endpoints (issue 45): claimed in Postgres so
-- such a call may share a batch workflow, whose id is not the request's. A key's request id is
-- derived from its project, endpoint, API key and the key itself (core/idempotency.ts).
create table idempotency_keys (
  request_id text primary key,
  project_id text not null,
  -- Names the first call's body: a repeat with another body is refused (422).
  body_tag text not null,
  -- The first call went as a workflow of its own (id = request id), not in a batch: Temporal's
  -- workflow id is what tells its repeats apart, so a repeat takes the same way.
  own_workflow boolean not null,
  claimed_at timestamptz not null default now()
);
create index idempotency_keys_claimed on idempotency_keys (claimed_at);
