/**
 * A vitest reporter that ends the run with one plain line, `Tests: N passed, N failed, N skipped`.
 * CI reads a run's closing line to know tests ran; it knows pytest's banner (which Schemathesis
 * prints in check:api) but not vitest's summary, so without this line it read our runs as none.
 */
import type { Reporter, TestModule } from "vitest/node";

export default class ClosingLine implements Reporter {
  onTestRunEnd(modules: ReadonlyArray<TestModule>): void {
    const count = { passed: 0, failed: 0, skipped: 0, pending: 0 };
    for (const module of modules) {
      for (const test of module.children.allTests()) count[test.result().state] += 1;
    }
    const skipped = count.skipped + count.pending;
    process.stdout.write(
      `\nTests: ${count.passed} passed, ${count.failed} failed, ${skipped} skipped\n`,
    );
  }
}
