-- Each pool's balance and use, kept beside its ledger: a charge reads one row instead of summing
-- every charge before it (the ledger grows by a row per delivery, so that sum grew without end).
-- A trigger keeps them in step with every ledger insert, whoever writes it (grants, charges, a
-- worker still running code from before this migration). A charge's insert locks its pool's
-- row until commit, so a pool's charges take turns and each sees the balance of those before.
create table credit_pools (
  project_id text not null references projects (id) on delete cascade,
  pool text not null check (pool in ('live', 'test')),
  balance bigint not null,
  used bigint not null,
  primary key (project_id, pool)
);

create function credit_pools_follow_ledger() returns trigger language plpgsql as $$
begin
  insert into credit_pools as p (project_id, pool, balance, used)
  values (new.project_id, new.pool, new.amount,
    case when new.reason = 'delivery' then -new.amount else 0 end)
  on conflict (project_id, pool) do update
    set balance = p.balance + excluded.balance, used = p.used + excluded.used;
  return null;
end $$;

-- No ledger insert lands between the sums and the trigger.
lock table credit_ledger in share row exclusive mode;

insert into credit_pools (project_id, pool, balance, used)
select project_id, pool, sum(amount), coalesce(-sum(amount) filter (where reason = 'delivery'), 0)
from credit_ledger group by project_id, pool;

create trigger credit_pools_follow_ledger after insert on credit_ledger
for each row execute function credit_pools_follow_ledger();
