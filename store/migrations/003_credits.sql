-- Credits: a ledger per project and pool. Grants are positive, charges negative; a delivery is
-- charged once however many attempts it took.
create table credit_ledger (
  id bigserial primary key,
  project_id text not null references projects (id) on delete cascade,
  pool text not null check (pool in ('live', 'test')),
  amount bigint not null,
  reason text not null check (reason in ('grant', 'delivery')),
  request_id text,
  target_id text,
  created_at timestamptz not null default now(),
  unique (request_id, target_id)
);
create index credit_ledger_pool on credit_ledger (project_id, pool);
