-- A project's replays under way are capped (core/limits.ts "replays"): the count reads this
-- partial index, which holds only requests being replayed.
create index requests_replaying on requests (project_id) where status = 'delivering' and replays > 0;
