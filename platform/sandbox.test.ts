import { readFile } from "node:fs/promises";
import { describe, expect, test } from "vitest";
import {
  checkSource,
  newSandbox,
  runTransformSource,
  SANDBOX_WASM,
  warm,
} from "../core/sandbox.ts";
import { nodeThreadClock } from "./transforms.ts";

const module = await WebAssembly.compile(
  await readFile(new URL(import.meta.resolve(SANDBOX_WASM))),
);
await warm(module);
const sandbox = await newSandbox(module);
const call = { path: "/", query: {}, headers: {}, bodyText: '{"a":1}' };
const run = (source: string) => runTransformSource(sandbox, source, call);
const META = JSON.stringify({ path: "/", query: {}, headers: {} });

describe("a transformation's run", () => {
  test("answers what the function returned, less its body, and the body it set", () => {
    expect(run("(r) => ({ ...r, body: { ...r.body, b: 2 } })")).toEqual({
      output: META,
      bodyText: '{"a":1,"b":2}',
    });
    expect(run("(r) => ({ ...r, path: '/x', body: 'plain' })")).toEqual({
      output: JSON.stringify({ path: "/x", query: {}, headers: {} }),
      bodyText: "plain",
    });
    expect(run("(r) => null")).toEqual({ output: "null", bodyText: null });
    expect(run("(r) => {}")).toEqual({ output: undefined, bodyText: null });
  });

  test("a body not read nor set goes as it came; one read may have changed, and goes again", () => {
    // `{...request}` copies no body: the call's own goes, never parsed.
    expect(run("(r) => ({ ...r, headers: { a: 'b' } })")).toEqual({
      output: JSON.stringify({ path: "/", query: {}, headers: { a: "b" } }),
      bodyText: null,
    });
    expect(run("(r) => r")).toEqual({ output: META, bodyText: null });
    expect(run("(r) => { r.body.a = 2; return { ...r } }")).toEqual({
      output: META,
      bodyText: '{"a":2}',
    });
    expect(
      runTransformSource(sandbox, "(r) => r.body.length ? r : null", {
        ...call,
        bodyText: "not json",
      }),
    ).toEqual({ output: META, bodyText: "not json" });
  });

  test("a body in any script reaches the function whole, and comes back whole", () => {
    const body = { name: "Zoë Ångström", note: "€ 5, 日本, 😀", empty: "" };
    const echoed = runTransformSource(
      sandbox,
      "(r) => ({ ...r, body: { ...r.body, echo: r.body.note } })",
      {
        ...call,
        bodyText: JSON.stringify(body),
      },
    );
    expect(echoed).toEqual({
      output: META,
      bodyText: JSON.stringify({ ...body, echo: body.note }),
    });
  });

  test("a throw, a loop, an allocation without bound, a recursion: each its reason", () => {
    expect(run("(r) => { throw new Error('boom') }")).toEqual({ error: "it threw Error: boom" });
    expect(run("(r) => { for (;;) {} }")).toEqual({ error: "it ran past 50 ms" });
    expect(run("(r) => 'x'.repeat(1e8)")).toEqual({ error: "it ran out of its 64 MiB" });
    expect(run("(r) => { const a = []; for (;;) a.push({ n: a.length }) }")).toEqual({
      error: "it ran past 50 ms",
    });
    expect(run("(r) => { const f = () => f(); return f() }")).toEqual({
      error: "it overflowed its stack",
    });
  });

  test("has no host: no I/O, no timers, nothing but the language", () => {
    for (const name of ["fetch", "require", "process", "setTimeout", "Deno", "WebAssembly"]) {
      expect(run(`(r) => typeof ${name}`)).toMatchObject({ output: '"undefined"' });
    }
  });

  test("sees nothing an earlier run left", () => {
    expect(run("(r) => { globalThis.left = 'secret'; return r }")).not.toHaveProperty("error");
    expect(run("(r) => typeof globalThis.left")).toMatchObject({ output: '"undefined"' });
    sandbox.tidy(); // as a thread does after each answer: the next run's runtime made ready
    expect(run("(r) => typeof globalThis.left")).toMatchObject({ output: '"undefined"' });
  });

  test("a runtime made ready early still gives its run the whole 50 ms", async () => {
    sandbox.tidy();
    await new Promise((resolve) => setTimeout(resolve, 80));
    const busy = "(r) => { const end = Date.now() + 20; while (Date.now() < end) {} return r }";
    expect(run(busy)).toEqual({ output: META, bodyText: null });
  });
});

describe("a run's time is the CPU time its thread spends on it", () => {
  const busyFor = (ms: number) =>
    `(r) => { const end = Date.now() + ${ms}; while (Date.now() < end) {} return r }`;

  test("a run its machine keeps waiting is not ended for the wait", async () => {
    // A thread clock that sees no CPU spent: a machine busy with others while the run waits.
    const waiting = await newSandbox(module, () => 0);
    expect(runTransformSource(waiting, busyFor(150), call)).toEqual({
      output: META,
      bodyText: null,
    });
  });

  test("but ends at a second on the clock, however little CPU it had", async () => {
    const waiting = await newSandbox(module, () => 0);
    expect(runTransformSource(waiting, "(r) => { for (;;) {} }", call)).toEqual({
      error: "it was still running after 1000 ms",
    });
  });

  test.runIf(process.platform === "linux")(
    "Node reads its thread's CPU time, and a run spending it ends at 50 ms",
    async () => {
      const clock = nodeThreadClock();
      if (!clock) throw new Error("no /proc/thread-self/schedstat on this Linux");
      // Spun until it has counted 20 ms, or 5 s passed: a loaded machine slows it, never stops it.
      const before = clock();
      const giveUp = Date.now() + 5000;
      while (clock() - before < 20 && Date.now() < giveUp) {}
      expect(clock() - before).toBeGreaterThanOrEqual(20);
      const timed = await newSandbox(module, clock);
      expect(runTransformSource(timed, "(r) => { for (;;) {} }", call)).toEqual({
        error: "it ran past 50 ms",
      });
    },
  );
});

test("a source is checked: it compiles, to a function", () => {
  expect(checkSource(sandbox, "(r) => r")).toEqual({ output: undefined, bodyText: null });
  expect(checkSource(sandbox, "(r => ")).toEqual({ error: expect.stringMatching(/SyntaxError/) });
  expect(checkSource(sandbox, "42")).toEqual({
    error: "it threw TypeError: the transformation is not a function",
  });
});
