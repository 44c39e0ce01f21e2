/**
 * The control plane's periodic sweeps (./accepted-sweep.ts, ./lane-sweep.ts): one run at a time,
 * every `everyMs`; a failed run is logged and the next goes on.
 */
export function startSweep(
  everyMs: number,
  sweep: () => Promise<unknown>,
  failed: (err: unknown) => void,
): { stop(): void } {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    sweep()
      .catch(failed)
      .finally(() => {
        running = false;
      });
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
