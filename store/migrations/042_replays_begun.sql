-- A project's replays under way (core/limits.ts "replays") are counted from the replays begun
-- here, no longer from a partial index on requests.status: an index whose predicate names status
-- made every request's settle a non-HOT update, new entries in every index of requests (016 keeps
-- the columns the worker updates out of indexes for that). A row whose request is no longer
-- delivering counts for nothing and goes with the project's next replay (store/request-log.ts).
create table replays_begun (
  request_id text primary key,
  project_id text not null references projects (id) on delete cascade
);
create index replays_begun_project on replays_begun (project_id);
insert into replays_begun (request_id, project_id)
  select id, project_id from requests where status = 'delivering' and replays > 0;
drop index requests_replaying;

-- Room on each page for a row's next version, so a request's and an attempt's settle and a lane
-- entry's turn, park and carrier are HOT updates more often (pages filled to 100% had none).
alter table requests set (fillfactor = 85);
alter table attempts set (fillfactor = 85);
alter table lane_entries set (fillfactor = 70);
