/** The ceiling probe's one activity: no I/O, so only Temporal's round trips are measured. */
export async function noop(): Promise<void> {}
