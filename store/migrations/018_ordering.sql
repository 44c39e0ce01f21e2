-- Ordered delivery per endpoint (issue 28): "none", or "fifo" (core/lanes.ts).
alter table endpoints add column ordering text not null default 'none'
  check (ordering in ('none', 'fifo'));
