-- Each endpoint's delivery signing secrets (Standard Webhooks `whsec_...`), sealed with
-- AES-256-GCM (RELAY_ENCRYPTION_KEY, the row id as context); never stored in plaintext. The
-- current one has no expiry; a rotation gives the previous ones an expiry (the overlap), past
-- which they no longer sign, and removes those already past theirs.
create table signing_secrets (
  id text primary key,
  endpoint_id text not null references endpoints (id) on delete cascade,
  sealed_secret bytea not null,
  created_at timestamptz not null,
  expires_at timestamptz
);
create index signing_secrets_endpoint on signing_secrets (endpoint_id);
