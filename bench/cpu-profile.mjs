/**
 * A CPU profile of every Node process it is preloaded into, written when the process exits:
 * `NODE_OPTIONS="--import ./bench/cpu-profile.mjs" CPU_PROFILE_DIR=/tmp/prof npm run ...` reaches
 * the stack's processes too, which inherit the environment (Node refuses `--cpu-prof` there).
 * One `{pid}-{entry}.cpuprofile` per process, for Chrome's DevTools or a script; docs/benchmarks.md
 * shows what issue 27's load spends its CPU on.
 */
import { writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { join } from "node:path";

const dir = process.env.CPU_PROFILE_DIR ?? ".";
const session = new Session();
session.connect();
session.post("Profiler.enable");
session.post("Profiler.setSamplingInterval", { interval: 1000 });
session.post("Profiler.start");
const entry = (process.argv.at(-1) ?? "node").replace(/\W+/g, "_").slice(-40);
process.on("exit", () => {
  // An in-thread session answers at once, so the profile is written before the process ends.
  session.post("Profiler.stop", (error, result) => {
    if (!error)
      writeFileSync(
        join(dir, `${process.pid}-${entry}.cpuprofile`),
        JSON.stringify(result.profile),
      );
  });
});
