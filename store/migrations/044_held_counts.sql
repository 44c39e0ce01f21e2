-- Each project's held deliveries (held_deliveries), counted beside them by 043's triggers, as
-- 026 and 043 count lane waits and delayed calls: the cap's check (store/waiting.ts) counted
-- every one of the project's held deliveries, through their targets, under its waiting lock, on
-- every change to them; a backlog at the cap cost that much a delivery held or let go. A held
-- delivery now names its project (set as it is written, from its target, so no writer changes).
-- One whose target is gone stays counted until it is let go (it used to leave the count with its
-- target).
alter table held_deliveries add column project_id text;
update held_deliveries h set project_id = e.project_id
from targets t join endpoints e on e.id = t.endpoint_id
where t.id = h.target_id;

create function held_project_of_target() returns trigger language plpgsql as $$
begin
  new.project_id := coalesce(new.project_id, (
    select e.project_id from targets t join endpoints e on e.id = t.endpoint_id
    where t.id = new.target_id));
  return new;
end $$;
create trigger held_project_of_target before insert on held_deliveries
  for each row execute function held_project_of_target();

create table held_counts (
  project_id text primary key,
  waiting bigint not null default 0
);
insert into held_counts (project_id, waiting)
select project_id, count(*) from held_deliveries where project_id is not null group by project_id;

create trigger held_counts_add after insert on held_deliveries
referencing new table as added for each statement
execute function count_per_project_add('held_counts');
create trigger held_counts_remove after delete on held_deliveries
referencing old table as removed for each statement
execute function count_per_project_remove('held_counts');
