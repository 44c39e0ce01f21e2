-- A target's filter (core/filter.ts): which calls it receives; null, every call.
alter table targets add column filter jsonb;
-- The targets a request was not delivered to, and why: [{targetId, targetName, reason}].
alter table requests add column skipped jsonb;
-- A call every target's filter dropped is logged 'skipped': nothing delivered, nothing charged.
alter table requests drop constraint requests_status_check;
alter table requests add constraint requests_status_check check (status in ('queued', 'scheduled',
  'delivering', 'delivered', 'partially_failed', 'failed', 'cancelled', 'skipped'));
