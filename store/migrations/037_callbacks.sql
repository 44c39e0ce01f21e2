-- Completion callbacks as the request log shows them (core/callbacks.ts): one row per target and
-- run that called back, its last try's outcome. Written by the callback's activity at each try.
create table callbacks (
  request_id text not null references requests (id) on delete cascade,
  target_id text not null,
  replay integer not null default 0,
  kind text not null check (kind in ('delivered', 'failed')),
  url text not null,
  tries integer not null,
  status_code integer,       -- the last try's answer; null when it had none
  error text,                -- why the last try failed, when it did
  sent boolean not null,     -- a try was answered 2xx: no more tries
  updated_at timestamptz not null,
  primary key (request_id, target_id, replay)
);
