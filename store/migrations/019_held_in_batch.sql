-- A batch's deliveries that wait only for a limited target's room wait in the batch's workflow
-- (workflows/batch-holds.ts): one workflow holds many, so a held delivery is its workflow and
-- its request (the same id for a request's own workflow).
alter table held_deliveries add column request_id text;
update held_deliveries set request_id = workflow_id;
alter table held_deliveries alter column request_id set not null;
alter table held_deliveries drop constraint held_deliveries_pkey;
alter table held_deliveries add primary key (target_id, workflow_id, request_id);
create index held_deliveries_request on held_deliveries (request_id);
-- A writer that names no request (an older worker mid-upgrade) holds a request's own workflow.
create function held_request_of_workflow() returns trigger language plpgsql as $$
begin
  new.request_id := coalesce(new.request_id, new.workflow_id);
  return new;
end $$;
create trigger held_request_of_workflow before insert on held_deliveries
  for each row execute function held_request_of_workflow();
