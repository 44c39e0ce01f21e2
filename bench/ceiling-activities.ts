/** The ceiling probe's one activity: no I/O, so only Temporal's round trips are measured. */
export async function noop(): Promise<void> {}

/** When it ran, on the machine's clock in ms (bench/sync-gap.ts splits a run's time by it). */
export async function stamp(): Promise<number> {
  return performance.timeOrigin + performance.now();
}
