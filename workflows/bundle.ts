/**
 * The workflow code, bundled for Temporal's sandbox (with Relay's failure converter, which must
 * be inside it too). `npm run build` writes the bundles into dist/ (dev/build.ts), so a worker
 * from the build only reads a file; from source the worker bundles at start, as webpack takes
 * seconds. Two bundles: with Relay's trace interceptor (trace-interceptors.ts) for a worker that
 * exports traces, and without it for one that does not, which then runs no interceptor at all.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { bundleWorkflowCode, type WorkerOptions } from "@temporalio/worker";
import { runsFromBuild, siblingModule } from "../platform/modules.ts";
import { FAILURE_CONVERTER_PATH } from "../platform/temporal.ts";

const bundleFiles = { plain: "workflow-bundle.js", traced: "workflow-bundle-traced.js" };

function bundleOf(traced: boolean) {
  return bundleWorkflowCode({
    workflowsPath: siblingModule(import.meta.url, "workflows"),
    ...(traced && {
      workflowInterceptorModules: [siblingModule(import.meta.url, "trace-interceptors")],
    }),
    failureConverterPath: FAILURE_CONVERTER_PATH,
  });
}

/** What a worker runs: from the build, its bundle file; from source, a bundle made now. */
export async function workflowBundleFor(
  traced: boolean,
): Promise<NonNullable<WorkerOptions["workflowBundle"]>> {
  const file = traced ? bundleFiles.traced : bundleFiles.plain;
  if (runsFromBuild(import.meta.url))
    return { codePath: fileURLToPath(new URL(file, import.meta.url)) };
  return bundleOf(traced);
}

/** Bundles the sources, both ways, into `dir` (the build's workflows/). */
export async function writeWorkflowBundles(dir: string): Promise<void> {
  for (const traced of [false, true]) {
    const { code } = await bundleOf(traced);
    await writeFile(join(dir, traced ? bundleFiles.traced : bundleFiles.plain), code);
  }
}
