-- A member token's optional end (issue 25): past it the token is refused like an unknown one.
-- Rotation replaces token_hash in place and keeps the expiry.
alter table members add column expires_at timestamptz;
