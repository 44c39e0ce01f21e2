-- Codec sessions signed out before their expiry (core/operator-session.ts): a session is a
-- stateless signed cookie, so its end is kept here, by the cookie's SHA-256, until it would
-- have expired anyway.
create table ended_codec_sessions (
  session_hash bytea primary key,
  expires_at timestamptz not null
);
