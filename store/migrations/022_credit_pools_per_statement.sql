-- Pools follow the ledger and the holds once per statement, by each pool's sum, not once per
-- row: a batch's charges and holds are sets of 25 or more rows of one pool, and a trigger per
-- row updated that pool's row as many times, each update a new version of the row and a WAL
-- record, three per delivery. The sums are the same, and each statement still locks its pools'
-- rows until its transaction commits.

create function credit_pools_follow_ledger_rows() returns trigger language plpgsql as $$
begin
  insert into credit_pools as p (project_id, pool, balance, used)
  select project_id, pool, sum(amount),
    coalesce(-sum(amount) filter (where reason = 'delivery'), 0)
  from added group by project_id, pool order by project_id, pool
  on conflict (project_id, pool) do update
    set balance = p.balance + excluded.balance, used = p.used + excluded.used;
  return null;
end $$;

create function credit_pools_follow_added_holds() returns trigger language plpgsql as $$
begin
  update credit_pools c set held = c.held + h.amount
  from (select project_id, pool, sum(amount) as amount from added group by project_id, pool) h
  where c.project_id = h.project_id and c.pool = h.pool;
  return null;
end $$;

create function credit_pools_follow_removed_holds() returns trigger language plpgsql as $$
begin
  update credit_pools c set held = c.held - h.amount
  from (select project_id, pool, sum(amount) as amount from removed group by project_id, pool) h
  where c.project_id = h.project_id and c.pool = h.pool;
  return null;
end $$;

drop trigger credit_pools_follow_ledger on credit_ledger;
drop trigger credit_pools_follow_holds on credit_holds;
drop function credit_pools_follow_ledger();
drop function credit_pools_follow_holds();

create trigger credit_pools_follow_ledger after insert on credit_ledger
  referencing new table as added
  for each statement execute function credit_pools_follow_ledger_rows();
create trigger credit_pools_follow_added_holds after insert on credit_holds
  referencing new table as added
  for each statement execute function credit_pools_follow_added_holds();
create trigger credit_pools_follow_removed_holds after delete on credit_holds
  referencing old table as removed
  for each statement execute function credit_pools_follow_removed_holds();
