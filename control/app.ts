/** Everything the control plane's handlers share, built once per process. */

import type { ChangeNotifier } from "../store/changes.ts";
import type { Clock } from "../store/clock.ts";
import type { Deps } from "./api/context.ts";
import type { Credentials } from "./auth.ts";
import type { CodecSettings } from "./codec.ts";

export interface ControlApp {
  deps: Deps;
  credentials: Credentials;
  /** The codec endpoint's keys, operators and CORS origin (/codec). */
  codec: CodecSettings;
  notifier: ChangeNotifier;
  clock: Clock;
  /** RELAY_DEV_CLOCK=1: /admin/clock and /admin/rotation/run exist. */
  devClock: boolean;
  /** When set, GET /metrics needs it as a bearer token; unset, only loopback peers may scrape. */
  metricsToken?: string | undefined;
  /** Runs the key rotation now, through Temporal, and answers how many keys it rotated. */
  runRotation: () => Promise<number>;
}
