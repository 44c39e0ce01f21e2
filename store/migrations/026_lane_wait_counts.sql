-- Each project's ordered requests in their lanes (lane_waits), counted beside them: the cap's
-- check (store/waiting.ts) reads one row rather than counting every wait under the project's
-- waiting lock, a cost that grew with the waits. Statement triggers keep it in step with every
-- insert and delete, whoever makes it (a claim, a leave, the retention's sweep).
create table lane_wait_counts (
  project_id text primary key,
  waiting bigint not null default 0
);
insert into lane_wait_counts (project_id, waiting)
select project_id, count(*) from lane_waits group by project_id;

create function lane_wait_counts_add() returns trigger language plpgsql as $$
begin
  insert into lane_wait_counts (project_id, waiting)
  select project_id, count(*) from added group by project_id order by project_id
  on conflict (project_id) do update set waiting = lane_wait_counts.waiting + excluded.waiting;
  return null;
end $$;

create function lane_wait_counts_remove() returns trigger language plpgsql as $$
begin
  update lane_wait_counts c set waiting = c.waiting - r.n
  from (select project_id, count(*) as n from removed group by project_id) r
  where c.project_id = r.project_id;
  return null;
end $$;

create trigger lane_wait_counts_add after insert on lane_waits
referencing new table as added for each statement execute function lane_wait_counts_add();
create trigger lane_wait_counts_remove after delete on lane_waits
referencing old table as removed for each statement execute function lane_wait_counts_remove();
