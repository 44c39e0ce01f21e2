/** Embedded PostgreSQL's address; dev/postgres-server.ts runs the server itself. */

export const USER = "relay";
/** Loopback only, so a fixed local password protects nothing worth a secret. */
export const PASSWORD = "relay";
export const DATABASE = "relay";

export function embeddedPostgresUrl(port: number): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${DATABASE}`;
}
