-- An attempt is logged when it starts; latency and outcome follow when it ends. One whose worker
-- died keeps a null latency until the next attempt marks it lost.
alter table attempts alter column latency_ms drop not null;
