-- Projects, members, routing, keys, and the request log.
create table projects (
  id text primary key,
  slug text not null unique,
  name text not null,
  plan text not null check (plan in ('free', 'paid')),
  default_key_ttl_days integer check (default_key_ttl_days between 1 and 3650),
  max_key_ttl_days integer check (max_key_ttl_days between 1 and 3650),
  editors_may_create_non_expiring_keys boolean not null default true,
  created_at timestamptz not null default now()
);

create table members (
  id text primary key,
  project_id text not null references projects (id) on delete cascade,
  name text not null,
  role text not null check (role in ('owner', 'editor')),
  token_hash bytea not null unique,
  created_at timestamptz not null default now()
);
create index members_project on members (project_id);

create table lines (
  project_id text not null references projects (id) on delete cascade,
  key text not null,
  created_at timestamptz not null default now(),
  primary key (project_id, key)
);

create table endpoints (
  id text primary key,
  project_id text not null,
  line_key text not null,
  path text not null,
  ip_allowlist text[] not null default '{}',
  schema jsonb,
  rate_limit jsonb,
  version integer not null default 1,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now(),
  unique (project_id, line_key, path),
  foreign key (project_id, line_key) references lines (project_id, key) on delete cascade
);

create table targets (
  id text primary key,
  endpoint_id text not null references endpoints (id) on delete cascade,
  position integer not null,
  name text not null,
  target_url text not null,
  delivery_mode text not null check (delivery_mode in ('async', 'sync', 'stream')),
  timeout_seconds integer not null check (timeout_seconds between 1 and 90),
  headers jsonb not null default '{}',
  unique (endpoint_id, position)
);

create table api_keys (
  id text primary key,
  project_id text not null references projects (id) on delete cascade,
  name text not null,
  mode text not null check (mode in ('live', 'test')),
  key_hash bytea not null unique,
  expires_at timestamptz,
  revoked_at timestamptz,
  predecessor_id text references api_keys (id),
  created_at timestamptz not null default now()
);
create index api_keys_project on api_keys (project_id);
create unique index api_keys_one_successor on api_keys (predecessor_id);

create table requests (
  id text primary key,
  project_id text not null references projects (id) on delete cascade,
  line_key text not null,
  endpoint_path text not null,
  key_mode text not null check (key_mode in ('live', 'test')),
  status text not null
    check (status in ('queued', 'delivering', 'delivered', 'partially_failed', 'failed')),
  body_bytes integer not null,
  received_at timestamptz not null,
  updated_at timestamptz not null default now()
);
create index requests_project_received on requests (project_id, received_at desc, id desc);

create table attempts (
  id bigserial primary key,
  request_id text not null references requests (id) on delete cascade,
  target_id text not null,
  target_name text not null,
  attempt integer not null,
  started_at timestamptz not null,
  status_code integer,
  latency_ms integer not null,
  error text
);
create index attempts_request on attempts (request_id, id);
