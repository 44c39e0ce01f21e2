-- An ordered request in its lane (workflows/lanes.ts), from its workflow's start to its end: it
-- counts among its project's waiting deliveries, so one project's keys and lanes are bounded by
-- its cap (store/waiting.ts), as its held and scheduled deliveries are.
create table lane_waits (
  request_id text primary key,
  project_id text not null,
  lane_id text not null,
  joined_at timestamptz not null default now()
);
create index lane_waits_project on lane_waits (project_id);
