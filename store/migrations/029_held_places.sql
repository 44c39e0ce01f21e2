-- A place under the project's cap on waiting deliveries, taken as a call to a target that holds
-- its deliveries (paused, its circuit open) is accepted, as a delayed call's is (store/waiting.ts):
-- the worker turns it into the held delivery itself, a release or cancel gives it back, and one
-- the worker never turned (the target let go before it got there) lapses at `expires_at`.
create table held_places (
  request_id text not null,
  target_id text not null,
  project_id text not null,
  expires_at timestamptz not null,
  primary key (request_id, target_id)
);
create index held_places_project on held_places (project_id);
create index held_places_expiry on held_places (expires_at);
