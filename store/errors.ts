/**
 * What the driver's errors mean, so callers above store/ map them to their own errors without
 * knowing Postgres: its SQLSTATE codes stay here.
 */
import postgres from "postgres";

const { PostgresError } = postgres;

/** A unique constraint refused the write: the thing exists already. */
export function isUniqueViolation(cause: unknown): boolean {
  return cause instanceof PostgresError && cause.code === "23505";
}

/**
 * Postgres refused a value (SQLSTATE class 22, data exceptions: a NUL inside a string, which text
 * cannot hold), so what was stored came from the caller's input.
 */
export function isRefusedValue(cause: unknown): boolean {
  return cause instanceof PostgresError && cause.code.startsWith("22");
}
