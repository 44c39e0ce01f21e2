-- What the log keeps of a request (016) can be erased: on demand (DELETE .../requests/{id}/content),
-- or after the project's own retention of content (projects.content_retention_days). The row, its
-- status and its attempts stay for the log's retention; this says when the content went.
alter table requests add column content_erased_at timestamptz;
-- Days a project's request bodies, headers and answers are kept; null: as long as the log keeps
-- the request (RELAY_LOG_RETENTION_DAYS).
alter table projects add column content_retention_days integer
  check (content_retention_days between 1 and 3650);
