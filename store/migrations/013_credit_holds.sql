-- Credit holds: what a metered call's deliveries may still cost, from the edge's acceptance until
-- each delivery settles (charged, or given back). A pool promises no more than it has: a call is
-- accepted only when its holds fit in the balance less what is held already.
create table credit_holds (
  request_id text not null,
  target_id text not null,
  project_id text not null references projects (id) on delete cascade,
  pool text not null check (pool in ('live', 'test')),
  amount bigint not null check (amount > 0),
  created_at timestamptz not null default now(),
  primary key (request_id, target_id)
);
create index credit_holds_created on credit_holds (created_at);

-- Each pool's holds in sum, beside its balance: a reservation checks and grows it under the
-- pool row's lock, as charges already move the balance (migration 007). A trigger keeps it in
-- step with every insert and delete, whoever makes it (a reservation, a charge, a release, the
-- retention's sweep, a project's deletion).
alter table credit_pools add column held bigint not null default 0;

create function credit_pools_follow_holds() returns trigger language plpgsql as $$
begin
  if tg_op = 'INSERT' then
    update credit_pools set held = held + new.amount
    where project_id = new.project_id and pool = new.pool;
  else
    update credit_pools set held = held - old.amount
    where project_id = old.project_id and pool = old.pool;
  end if;
  return null;
end $$;

create trigger credit_pools_follow_holds after insert or delete on credit_holds
for each row execute function credit_pools_follow_holds();

-- Delayed calls an edge accepted, until their time: with the deliveries held for a paused or
-- failing target (held_deliveries), what a project's cap on waiting deliveries counts. Written
-- when the call is accepted (the worker opens the request only a moment later), so two edges
-- cannot both take the last place.
create table scheduled_calls (
  request_id text primary key,
  project_id text not null references projects (id) on delete cascade,
  not_before timestamptz not null
);
create index scheduled_calls_project on scheduled_calls (project_id, not_before);

-- An operator's per-project cap on scheduled and held deliveries; null: the plan's.
alter table projects add column max_waiting_deliveries integer
  check (max_waiting_deliveries >= 0);
