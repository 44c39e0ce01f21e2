import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["{core,store,platform,control,edge,workflows,dev,test}/**/*.test.ts"],
    globalSetup: ["test/setup/stack.ts"],
    // The default summary, then the plain closing line CI reads (dev/closing-line.ts).
    reporters: ["default", "./dev/closing-line.ts"],
    // One real stack serves every file; files run one at a time on these 2-core machines.
    fileParallelism: false,
    // Files share one process and its loaded modules: a fresh one per file cost ~0.5 s each
    // (60-80 s a run). A file's own state lives in its module; shared globals (OpenTelemetry's
    // provider: core/recorded-spans.ts) are set once.
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
