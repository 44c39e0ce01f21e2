/**
 * Runs a transformation in QuickJS compiled to WebAssembly: no I/O, no host objects, a fresh
 * QuickJS runtime per run (nothing one run leaves is seen by the next), its time, memory and stack
 * bounded (./transform.ts `TRANSFORM_LIMITS`), and a fresh WebAssembly instance whenever the
 * project changes, so no memory a project's run used is ever in reach of another project's.
 * Synchronous: a runtime calls it on a thread of its own (./transform-pool.ts), never on its
 * event loop. The same on Node and Deno, but for the clock a run is timed by (`ThreadClock`).
 */
import wasmfile from "@jitl/quickjs-wasmfile-release-sync";
import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
  type QuickJSSyncVariant,
  type QuickJSWASMModule,
} from "quickjs-emscripten-core";
import { type SandboxCall, TRANSFORM_LIMITS } from "./transform.ts";

/** Its types describe the CommonJS build's module object; imported as ESM, it is the variant. */
const variant = wasmfile as unknown as QuickJSSyncVariant;

/** QuickJS's WebAssembly, for each runtime to read its bytes (its package's `./wasm`). */
export const SANDBOX_WASM = "@jitl/quickjs-wasmfile-release-sync/wasm";

/**
 * The CPU time, in ms, the calling thread has run: a run's time is what it spends, not what a
 * loaded machine keeps it waiting. Node reads it on Linux (platform/transforms.ts); Deno cannot
 * without --allow-all, and its runs are timed on the clock.
 */
export type ThreadClock = () => number;

/**
 * Linux's clock of a thread (`/proc/thread-self/schedstat`: its nanoseconds on a CPU first), read
 * by `read`; undefined where there is none to read, and a run's time is the wall clock's alone.
 */
export function schedstatClock(read: () => string): ThreadClock | undefined {
  const ms = () => Number.parseInt(read(), 10) / 1e6;
  try {
    return Number.isFinite(ms()) ? ms : undefined;
  } catch {
    return undefined;
  }
}

/** A fresh sandbox: its own instance of QuickJS's compiled module, its own memory. */
export async function newSandbox(
  module: WebAssembly.Module,
  clock?: ThreadClock,
): Promise<Sandbox> {
  return new Sandbox(
    await newQuickJSWASMModuleFromVariant(newVariant(variant, { wasmModule: module })),
    clock,
  );
}

/** A QuickJS runtime for one run, bounded; its clocks start when the run takes it. */
interface RunContext {
  runtime: QuickJSRuntime;
  vm: QuickJSContext;
  startedAt: number;
  cpuAt: number;
  /** When the interrupt handler next looks at the run's CPU time. */
  deadline: number;
  interrupted: "cpu" | "wall" | null;
}

/**
 * One instance of QuickJS, whose runs each take a runtime of their own. Making a runtime and
 * freeing a used one (with all a 64 KiB body's objects) cost as much as a quarter of a run, so
 * a thread does both after it has sent a run's answer (`tidy`), off the caller's path.
 */
export class Sandbox {
  #quickjs: QuickJSWASMModule;
  #clock: ThreadClock | undefined;
  #ready: RunContext | undefined;
  #spent: RunContext[] = [];

  constructor(quickjs: QuickJSWASMModule, clock?: ThreadClock) {
    this.#quickjs = quickjs;
    this.#clock = clock;
  }

  /** A fresh runtime for a run starting now, freed by the next `tidy` (or `take`). */
  take(): RunContext {
    this.#free();
    const context = this.#ready ?? this.#newContext();
    this.#ready = undefined;
    context.startedAt = Date.now();
    context.cpuAt = this.#clock?.() ?? 0;
    context.deadline = context.startedAt + TRANSFORM_LIMITS.runMs;
    this.#spent.push(context);
    return context;
  }

  /** Frees the runs' runtimes and makes the next one ready. */
  tidy(): void {
    this.#free();
    this.#ready ??= this.#newContext();
  }

  #free(): void {
    for (const { vm, runtime } of this.#spent.splice(0)) {
      vm.dispose();
      runtime.dispose();
    }
  }

  #newContext(): RunContext {
    const runtime = this.#quickjs.newRuntime();
    runtime.setMemoryLimit(TRANSFORM_LIMITS.memoryBytes);
    runtime.setMaxStackSize(TRANSFORM_LIMITS.stackBytes);
    const context: RunContext = {
      runtime,
      vm: runtime.newContext(),
      startedAt: 0,
      cpuAt: 0,
      deadline: 0,
      interrupted: null,
    };
    // Called between bytecodes. Its CPU time is only read once the wall clock says the run could
    // have spent it all: until then, it cannot have.
    runtime.setInterruptHandler(() => {
      const now = Date.now();
      if (now <= context.deadline) return false;
      if (now - context.startedAt >= TRANSFORM_LIMITS.wallMs) context.interrupted = "wall";
      else {
        const spent = this.#clock ? this.#clock() - context.cpuAt : now - context.startedAt;
        if (spent >= TRANSFORM_LIMITS.runMs) context.interrupted = "cpu";
        else context.deadline = now + TRANSFORM_LIMITS.runMs - spent;
      }
      return context.interrupted !== null;
    });
    return context;
  }
}

/**
 * What a run came to: what the function returned, as JSON less its body (undefined for nothing),
 * and the body it set, as text (null: none set, the call's own goes); or why it failed.
 */
export type SandboxRun =
  | { output: string | undefined; bodyText: string | null }
  | { error: string };

/**
 * The request the function is handed: its body parsed from `__body` when first read, and a body
 * the function sets or reads (and may have changed) is what goes. A returned object with no
 * `body` of its own (`{...request}` copies none: the property is not enumerable) keeps it.
 */
const HANDED = `const __request = JSON.parse(__meta);
  __request.method = "POST";
  let __read = false, __parsed;
  Object.defineProperty(__request, "body", {
    configurable: true,
    get() {
      if (!__read) {
        __read = true;
        try { __parsed = JSON.parse(__body); } catch { __parsed = __body; }
      }
      return __parsed;
    },
    set(value) { __read = true; __parsed = value; },
  });`;

const RETURNED = `const __own = __out !== __request && Object.prototype.hasOwnProperty.call(__out, "body");
  const __sentBody = __own ? __out.body : __read ? __parsed : undefined;
  globalThis.__sent = __sentBody === undefined ? null
    : typeof __sentBody === "string" ? __sentBody : JSON.stringify(__sentBody);
  return JSON.stringify({ path: __out.path, query: __out.query, headers: __out.headers });`;

/**
 * Calls the function `source` evaluates to on `call`, and answers what it returned. A throw, a
 * run past its time, memory or stack, or a source that is not a function answers the reason.
 */
export function runTransformSource(
  sandbox: Sandbox,
  source: string,
  call: SandboxCall,
): SandboxRun {
  const { bodyText, ...meta } = call;
  return inSandbox(sandbox, (vm) => {
    for (const [name, value] of [
      ["__meta", JSON.stringify(meta)],
      ["__body", bodyText],
    ] as const) {
      const handle = newText(vm, value);
      vm.setProp(vm.global, name, handle);
      handle.dispose();
    }
    return `const __f = (${source}\n);
        if (typeof __f !== "function") throw new TypeError("the transformation is not a function");
        ${HANDED}
        const __out = __f(__request);
        __out === undefined ? undefined
          : __out === null || typeof __out !== "object" ? JSON.stringify(__out)
          : (() => { ${RETURNED} })();`;
  });
}

/**
 * Runs a transformation once in a throwaway sandbox: the engine compiles QuickJS's functions on
 * their first call, which would otherwise count against the first real run's 50 ms.
 */
export async function warm(module: WebAssembly.Module): Promise<void> {
  const call = { path: "/", query: {}, headers: {}, bodyText: '{"items":[1,"a"]}' };
  runTransformSource(await newSandbox(module), "(r) => ({ ...r, body: [r.body] })", call);
}

/** Whether `source` is a transformation: an error when it does not compile or is no function. */
export function checkSource(sandbox: Sandbox, source: string): SandboxRun {
  return inSandbox(
    sandbox,
    () => `const __f = (${source}\n);
      if (typeof __f !== "function") throw new TypeError("the transformation is not a function");`,
  );
}

function inSandbox(sandbox: Sandbox, code: (vm: QuickJSContext) => string): SandboxRun {
  const context = sandbox.take();
  const { vm } = context;
  const result = vm.evalCode(`"use strict";\n${code(vm)}`, "transform.js");
  if (result.error) {
    const thrown = vm.dump(result.error) as unknown;
    result.error.dispose();
    return { error: reasonOf(thrown, context.interrupted) };
  }
  const output = vm.typeof(result.value) === "string" ? vm.getString(result.value) : undefined;
  result.value.dispose();
  const sent = vm.getProp(vm.global, "__sent");
  const bodyText = vm.typeof(sent) === "string" ? vm.getString(sent) : null;
  sent.dispose();
  return { output, bodyText };
}

/** What quickjs-emscripten-core keeps protected on a context (the version is pinned). */
interface ContextInternals {
  module: { _malloc(bytes: number): number; _free(pointer: number): void; HEAPU8: Uint8Array };
  ffi: { QTS_NewString(context: number, pointer: number): number };
  ctx: { value: number };
  memory: { heapValueHandle(pointer: number): QuickJSHandle };
}

const utf8 = new TextEncoder();

/**
 * `vm.newString(text)`, less its cost: quickjs-emscripten copies a string into WebAssembly's
 * memory a character at a time in JavaScript (most of a millisecond for a 64 KiB body), where
 * `encodeInto` writes it at once. QuickJS reads it as a C string, as `newString` hands it.
 */
function newText(vm: QuickJSContext, text: string): QuickJSHandle {
  const { module, ffi, ctx, memory } = vm as unknown as ContextInternals;
  const bytes = text.length * 3 + 1; // UTF-8's worst case, and the closing NUL
  const pointer = module._malloc(bytes);
  try {
    const { written } = utf8.encodeInto(text, module.HEAPU8.subarray(pointer, pointer + bytes - 1));
    module.HEAPU8[pointer + written] = 0;
    return memory.heapValueHandle(ffi.QTS_NewString(ctx.value, pointer));
  } finally {
    module._free(pointer);
  }
}

/** What a failed run's thrown value says, in the request log's words. */
function reasonOf(thrown: unknown, interrupted: RunContext["interrupted"]): string {
  if (interrupted === "cpu") return `it ran past ${TRANSFORM_LIMITS.runMs} ms`;
  if (interrupted === "wall") return `it was still running after ${TRANSFORM_LIMITS.wallMs} ms`;
  const { name, message } = (thrown ?? {}) as { name?: string; message?: string };
  if (thrown === null || message === "out of memory") {
    return `it ran out of its ${TRANSFORM_LIMITS.memoryBytes / 1024 / 1024} MiB`;
  }
  if (message?.includes("stack overflow")) return "it overflowed its stack";
  const text = name && message !== undefined ? `${name}: ${message}` : String(thrown);
  return `it threw ${text.slice(0, 500)}`;
}

/** One run, as a thread is handed it (its answer: `ThreadAnswer`). */
export interface ThreadJob {
  id: number;
  /** Whose run it is: a project's runs share a sandbox, never another project's. */
  project: string;
  /** "run": the function on `call`; "check": only whether `source` is a function. */
  kind: "run" | "check";
  source: string;
  call?: SandboxCall;
}

/** A job's answer; or, first of all, that the thread is ready for jobs. */
export type ThreadAnswer = { id: number; run: SandboxRun } | typeof READY;

export const READY = { ready: true } as const;

/**
 * A sandbox thread's side of ./transform-pool.ts: compiles QuickJS from `wasm` (its bytes, as the
 * runtime reads them), says it is ready, then answers each job in turn, in a fresh sandbox when
 * the job's project is not the last one's. Its runs are timed by `clock`, the thread's own.
 */
export async function serveSandbox(
  port: {
    onJob(handle: (job: ThreadJob) => void): void;
    answer(answer: ThreadAnswer): void;
  },
  wasm: Promise<BufferSource>,
  clock?: ThreadClock,
): Promise<void> {
  const module = await WebAssembly.compile(await wasm);
  await warm(module);
  let current: { project: string; sandbox: Sandbox } | undefined;
  const sandboxOf = async (project: string) => {
    if (current?.project !== project) {
      current = { project, sandbox: await newSandbox(module, clock) };
    }
    return current.sandbox;
  };
  // One job at a time, in order: the pool sends the next only once this one is answered.
  port.onJob((job) => {
    void sandboxOf(job.project).then(
      (sandbox) => {
        const run =
          job.kind === "check"
            ? checkSource(sandbox, job.source)
            : runTransformSource(sandbox, job.source, job.call as SandboxCall);

        port.answer({ id: job.id, run });
        sandbox.tidy();
      },
      (error: unknown) => port.answer({ id: job.id, run: { error: `no sandbox: ${error}` } }),
    );
  });
  port.answer(READY);
}
