-- A replay is a delivery like a call (docs/api.md "The failure queue"): numbered per request
-- (`requests.replays`, the last one's number), its deliveries hold and are charged apart from the
-- call's and from other replays', keyed by (request, target, replay); the call's are replay 0.
alter table requests add column replays integer not null default 0;

alter table credit_ledger add column replay integer not null default 0;
alter table credit_ledger drop constraint credit_ledger_request_id_target_id_key;
alter table credit_ledger add constraint credit_ledger_delivery unique (request_id, target_id, replay);

alter table credit_holds add column replay integer not null default 0;
alter table credit_holds drop constraint credit_holds_pkey;
alter table credit_holds add primary key (request_id, target_id, replay);
