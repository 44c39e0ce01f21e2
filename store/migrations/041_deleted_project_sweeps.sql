-- A deleted project's Temporal histories are deleted twice: at its DELETE, and once more by the
-- first daily retention run at least an hour later (store/project-erase.ts), for a workflow one of
-- its running workflows started while the first deletion ran.
alter table deleted_projects add column histories_swept_at timestamptz;
