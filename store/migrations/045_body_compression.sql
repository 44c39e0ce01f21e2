-- Large request bodies (bodies.body, stored by reference) no longer go through pglz, Postgres's
-- default TOAST compression: it cost 3.3-5.3 ms of Postgres's CPU to store a 256 KiB body and
-- 1.3-1.5 ms to read it back, most of what a large body cost Relay's Postgres. lz4 where the
-- server is built with it (not measured here: the embedded server has none); else stored as it
-- is, out of line (1.5-1.9 ms and 0.8-0.9 ms, at 3-4 times the disk for JSON). docs/benchmarks.md.
do $$
begin
  alter table bodies alter column body set compression lz4;
exception when feature_not_supported then
  alter table bodies alter column body set storage external;
end $$;
