-- Which run of its request an attempt belongs to: the call's (0) or a replay's number. An attempt
-- started again where a 2xx of the same run is logged is not made (store/attempt-log.ts), while a
-- replay of a delivered request is sent again, as asked.
alter table attempts add column replay integer not null default 0;
