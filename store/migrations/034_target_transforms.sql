-- A target's transformation (core/transform.ts): the source of `(request) => request`; null, none.
alter table targets add column transform text;
-- An attempt its target's transformation dropped (returned null): the target was not called,
-- and the delivery ends skipped, not failed (nor charged: it has no status code).
alter table attempts add column skipped boolean not null default false;
