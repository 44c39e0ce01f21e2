-- The request as received (issue 28, inspectable requests), within the log's retention.
alter table requests add column headers jsonb;          -- inbound headers as forwarded to targets
                                                        -- (never authorization, never a secret-marked one); null: logged before 016
alter table requests add column body bytea;             -- the body when it travelled inline; null when stored by reference in `bodies`
                                                        -- (requests.id = bodies.request_id) or logged before 016
alter table requests add column body_ref text;          -- the body's key in `bodies` when stored by reference (an
                                                        -- Idempotency-Key's copy is `{id}.{tag}`); null: inline, or under the id
alter table requests add column idempotency_key text;   -- the caller's Idempotency-Key, when it sent one
alter table requests add column resent_from text;       -- "send again": the request this one was sent again from
alter table attempts add column response_headers jsonb; -- the target's answer headers (null: no answer)
alter table attempts add column response_body bytea;    -- the first 64 KiB of the target's answer body
alter table attempts add column response_truncated boolean not null default false; -- the answer was longer than 64 KiB

-- Finding a project's requests by the caller's Idempotency-Key. Partial: only the rows that
-- have one, so requests without pay nothing for it.
-- (Status, endpoint, time range and a target's status code are found along
-- requests_project_received, newest first, and attempts_request: no index on a column the
-- worker updates, which would cost every attempt its HOT update.)
create index requests_idempotency_key on requests (project_id, idempotency_key)
  where idempotency_key is not null;
