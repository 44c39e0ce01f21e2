/**
 * Modules named by path rather than imported (the Temporal SDK loads a failure converter and a
 * workflow bundle's inputs by file name), in the form their caller runs in: `.ts` from source
 * (tsx, vitest), `.js` from the build in dist/ (`npm run build`).
 */
import { extname } from "node:path";
import { fileURLToPath } from "node:url";

/** The file of module `name` beside the module at `moduleUrl`, with that module's extension. */
export function siblingModule(moduleUrl: string, name: string): string {
  return fileURLToPath(new URL(`./${name}${extname(moduleUrl)}`, moduleUrl));
}

/** True when the module at `moduleUrl` is compiled JavaScript, as `npm run build` emits. */
export function runsFromBuild(moduleUrl: string): boolean {
  return extname(moduleUrl) === ".js";
}
