-- Each edge's demand on each endpoint it served lately (calls a second that reached the rate
-- decision), from which the control planes split the endpoint's rate limit among the edges
-- (core/rate-shares.ts). Every edge rewrites its rows about once a second and only the last
-- few seconds count, so the table is unlogged: a crash empties it, and the edges' next reports
-- fill it again within a second (meanwhile each applies its fallback share).
create unlogged table rate_demand (
  project text not null,
  line text not null,
  path text not null,
  edge_id text not null,
  per_second double precision not null,
  reported_at timestamptz not null,
  primary key (project, line, path, edge_id)
);
