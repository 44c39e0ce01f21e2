-- A lane's entry carried by a batch (workflows/batch-holds.ts): the batch's workflow id, which a
-- turn given to a parked entry signals and the sweep of still heads looks up. Null: the
-- request's own workflow carries it, as before.
alter table lane_entries add column carrier text;
