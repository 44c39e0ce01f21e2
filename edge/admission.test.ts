import { expect, test } from "vitest";
import { type Release, StartAdmission } from "./admission.ts";

test("past the slots a call waits; past the wait it is refused, at once when the wait is 0", async () => {
  const admission = new StartAdmission(2, 50);
  const first = await admission.acquire("a");
  const second = await admission.acquire("a");
  expect(first).toBeTypeOf("function");
  expect(second).toBeTypeOf("function");
  const waited = performance.now();
  expect(await admission.acquire("a")).toBeNull();
  expect(performance.now() - waited).toBeGreaterThanOrEqual(45);

  // A slot freed while a call waits goes to it; one released twice frees one slot.
  const third = admission.acquire("b");
  first?.();
  first?.();
  const admitted = await third;
  expect(admitted).toBeTypeOf("function");
  expect(await new StartAdmission(1, 0).acquire("a")).toBeTypeOf("function");
  const full = new StartAdmission(1, 0);
  await full.acquire("a");
  expect(await full.acquire("b")).toBeNull();
  second?.();
  admitted?.();
  expect(await admission.acquire("c")).toBeTypeOf("function");
  expect(await admission.acquire("c")).toBeTypeOf("function");
});

test("freed slots go to the waiting projects in turn, not to one project's whole burst", async () => {
  const admission = new StartAdmission(1, 10_000);
  const held = (await admission.acquire("busy")) as Release;
  const order: string[] = [];
  const wait = (name: string, project: string) =>
    admission.acquire(project).then((release) => {
      order.push(name);
      release?.();
    });
  const burst = [1, 2, 3, 4].map((n) => wait(`busy${n}`, "busy"));
  const others = [wait("quiet1", "quiet"), wait("other1", "other"), wait("quiet2", "quiet")];
  held();
  await Promise.all([...burst, ...others]);
  expect(order).toEqual(["busy1", "quiet1", "other1", "busy2", "quiet2", "busy3", "busy4"]);
});
