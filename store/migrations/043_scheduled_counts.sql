-- Each project's delayed calls waiting for their time (scheduled_calls), counted beside them, as
-- 026 counts lane waits: a delayed call's admission (store/waiting.ts) read every one of its
-- project's under the project's waiting lock, a cost that grew with the waiting calls up to the
-- cap. Statement triggers keep it in step with every insert and delete, whoever makes it (an
-- admission, a due call's leaving, a cancel, the retention's sweep).
create table scheduled_counts (
  project_id text primary key,
  waiting bigint not null default 0
);
insert into scheduled_counts (project_id, waiting)
select project_id, count(*) from scheduled_calls group by project_id;

-- The statement triggers of a table whose rows name their project (project_id), counted per
-- project in the table named by the trigger's argument (project_id, waiting); rows that name
-- none are counted nowhere.
create function count_per_project_add() returns trigger language plpgsql as $$
begin
  execute format($q$
    insert into %I as c (project_id, waiting)
    select project_id, count(*) from added where project_id is not null
    group by project_id order by project_id
    on conflict (project_id) do update set waiting = c.waiting + excluded.waiting$q$,
    tg_argv[0]);
  return null;
end $$;

create function count_per_project_remove() returns trigger language plpgsql as $$
begin
  execute format($q$
    update %I c set waiting = c.waiting - r.n
    from (select project_id, count(*) as n from removed where project_id is not null
      group by project_id) r
    where c.project_id = r.project_id$q$,
    tg_argv[0]);
  return null;
end $$;

create trigger scheduled_counts_add after insert on scheduled_calls
referencing new table as added for each statement
execute function count_per_project_add('scheduled_counts');
create trigger scheduled_counts_remove after delete on scheduled_calls
referencing old table as removed for each statement
execute function count_per_project_remove('scheduled_counts');
