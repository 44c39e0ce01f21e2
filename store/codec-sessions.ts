/**
 * Codec sessions ended before their time (migration 028): a sign-out keeps the session's hash
 * until the session would have expired, and every control plane refuses it meanwhile. The ended
 * ones past their expiry go at the next sign-out.
 */
import { hashSecret } from "../core/secrets.ts";
import type { Sql } from "./db.ts";

export interface EndedSessions {
  end(session: string, expiresAt: Date): Promise<void>;
  isEnded(session: string): Promise<boolean>;
}

export function endedSessions(sql: Sql): EndedSessions {
  return {
    async end(session, expiresAt) {
      const hash = await hashSecret(session);
      await sql`delete from ended_codec_sessions where expires_at < now()`;
      await sql`
        insert into ended_codec_sessions (session_hash, expires_at) values (${hash}, ${expiresAt})
        on conflict do nothing`;
    },
    async isEnded(session) {
      const hash = await hashSecret(session);
      const [row] = await sql`select 1 from ended_codec_sessions where session_hash = ${hash}`;
      return row !== undefined;
    },
  };
}
