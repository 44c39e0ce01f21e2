-- The W3C trace a request's spans belong to, when the edge that took it exports traces: the
-- request log links each request to its trace.
alter table requests add column trace_id text;
