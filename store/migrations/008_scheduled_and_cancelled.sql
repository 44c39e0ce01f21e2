-- Delayed delivery and cancel: a request may wait for its time ('scheduled', until `not_before`)
-- and may be cancelled before it is delivered ('cancelled').
alter table requests drop constraint requests_status_check;
alter table requests add constraint requests_status_check check (status in
  ('queued', 'scheduled', 'delivering', 'delivered', 'partially_failed', 'failed', 'cancelled'));
alter table requests add column not_before timestamptz;
