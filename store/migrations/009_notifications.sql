-- Each project's notification URL, where Relay posts its operational events, and the secret
-- that signs them (Standard Webhooks `whsec_...`), sealed with AES-256-GCM (RELAY_ENCRYPTION_KEY,
-- the row id as context); never stored in plaintext. At most one per project; a rotation seals a
-- new secret in the same row, and the old one signs nothing from then on.
create table notification_settings (
  id text primary key,
  project_id text not null unique references projects (id) on delete cascade,
  url text not null,
  sealed_secret bytea not null,
  created_at timestamptz not null
);
