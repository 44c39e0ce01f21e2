-- Large request bodies, by reference (claim check): Temporal refuses payloads over 2 MB.
create table bodies (
  request_id text primary key,
  project_id text not null references projects (id) on delete cascade,
  body bytea not null,
  created_at timestamptz not null default now()
);
