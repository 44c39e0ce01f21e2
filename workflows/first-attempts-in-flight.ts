import type { DeliverInput, FirstAttempt } from "./deliveries.ts";

/**
 * First attempts in flight in one worker process, by delivery ("request id, space, target id").
 * A local activity outlives its workflow task when the task times out meanwhile (a worker short
 * of CPU or slots misses the task's heartbeat); Temporal then runs the task again, and with it
 * the attempt, while the first run is still at the target. The run again joins the one in flight
 * and answers its verdict, so the target is called once. (Run again on another worker, the log
 * tells it the first run is in flight there: ./deliveries.ts `rerunVerdict`; run again after the
 * first delivered, the attempt's start finds the 2xx logged: store/attempt-log.ts.)
 */
export class FirstAttemptsInFlight {
  private readonly running = new Map<string, Promise<FirstAttempt>>();

  /** `attempt` of `delivery`, or the verdict of the one in flight here already. */
  run(delivery: DeliverInput, attempt: () => Promise<FirstAttempt>): Promise<FirstAttempt> {
    const key = `${delivery.requestId} ${delivery.target.id}`;
    const inFlight = this.running.get(key);
    if (inFlight) return inFlight;
    const started = attempt().finally(() => this.running.delete(key));
    this.running.set(key, started);
    return started;
  }
}
