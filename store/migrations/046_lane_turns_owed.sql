-- A turn given to a parked entry whose carrier is still to be told (store/lanes.ts): set in the
-- leave's transaction, the signal sent after its commit. A sender that died between the two, or a
-- Temporal down meanwhile, left the lane waiting for the sweep of still heads, ten minutes on; the
-- sweep of owed turns (control/lane-sweep.ts) tells it within seconds. Cleared when its carrier
-- claims it, or once told again. Not indexed: a turn's hand-over stays a HOT update, and the
-- sweep reads the live entries only (lane_entries_waiting: 15 ms at 100,000 live and 2 million
-- left, every 5 s).
alter table lane_entries add column owed boolean not null default false;
