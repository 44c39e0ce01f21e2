import { describe, expect, test } from "vitest";
import { grouped } from "./grouped.ts";

/** A grouping whose runs wait to be answered (`answerNext`), recording each group it ran. */
function recording(
  maxItems: number,
  fits?: (gathered: readonly number[], item: number) => boolean,
) {
  const runs: { key: string; items: number[] }[] = [];
  const pending: (() => void)[] = [];
  const call = grouped<number, number>({
    maxItems,
    ...(fits && { fits }),
    run: (key, items) =>
      new Promise((resolve) => {
        runs.push({ key, items });
        pending.push(() => resolve(items.map((i) => i * 10)));
      }),
  });
  const answerNext = async () => {
    pending.shift()?.();
    await new Promise((resolve) => setTimeout(resolve, 0));
  };
  return { call, runs, answerNext };
}

describe("grouped", () => {
  test("a lone call runs at once; calls arriving meanwhile run together when it is answered", async () => {
    const { call, runs, answerNext } = recording(10);
    const first = call("p", 1);
    expect(runs).toEqual([{ key: "p", items: [1] }]);
    const rest = [call("p", 2), call("p", 3), call("q", 4)];
    expect(runs.map((r) => r.items)).toEqual([[1], [4]]);
    await answerNext();
    expect(await first).toBe(10);
    expect(runs.map((r) => r.items)).toEqual([[1], [4], [2, 3]]);
    await answerNext();
    await answerNext();
    expect(await Promise.all(rest)).toEqual([20, 30, 40]);
  });

  test("with firstWaitsATurn, the calls of an idle key made in one turn run as one group; behind it, calls gather as before", async () => {
    const runs: number[][] = [];
    const pending: (() => void)[] = [];
    const call = grouped<number, number>({
      maxItems: 10,
      firstWaitsATurn: true,
      run: (_, items) =>
        new Promise((resolve) => {
          runs.push(items);
          pending.push(() => resolve(items));
        }),
    });
    const burst = [call("p", 1), call("p", 2), call("p", 3)];
    expect(runs).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(runs).toEqual([[1, 2, 3]]);
    const behind = [call("p", 4), call("p", 5)];
    pending.shift()?.();
    expect(await Promise.all(burst)).toEqual([1, 2, 3]);
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(runs).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
    pending.shift()?.();
    expect(await Promise.all(behind)).toEqual([4, 5]);
  });

  test("after a lone item's run has answered it, the next item runs at once; behind a group's run, items gather until it finishes", async () => {
    const runs: { items: number[]; answer(): void; finish(): void }[] = [];
    const call = grouped<number, number>({
      maxItems: 10,
      run: (_, items, answerNow) =>
        new Promise((resolve) => {
          runs.push({ items, answer: () => answerNow(items), finish: () => resolve(items) });
        }),
    });
    const tick = () => new Promise((resolve) => setTimeout(resolve, 0));
    const first = call("p", 1);
    runs[0]?.answer();
    expect(await first).toBe(1);
    const lone = call("p", 2); // run 1 answered, still finishing
    const gathered = [call("p", 3), call("p", 4)]; // behind run 2, not answered yet
    expect(runs.map((r) => r.items)).toEqual([[1], [2]]);
    runs[1]?.answer();
    expect(await lone).toBe(2);
    runs[0]?.finish();
    await tick();
    expect(runs.map((r) => r.items)).toEqual([[1], [2], [3, 4]]);
    runs[2]?.answer();
    expect(await Promise.all(gathered)).toEqual([3, 4]);
    const behindGroup = call("p", 5);
    expect(runs).toHaveLength(3); // run [3, 4] answered but finishing: 5 gathers
    runs[2]?.finish();
    await tick();
    expect(runs.map((r) => r.items)).toEqual([[1], [2], [3, 4], [5]]);
    runs[3]?.answer();
    expect(await behindGroup).toBe(5);
  });

  test("a wait for as many items as have gathered behind a run already ends at once", async () => {
    let waited = -1;
    const call = grouped<number, number>({
      maxItems: 10,
      run: async (_, items, answerNow, behind) => {
        if (items[0] !== 1) return items;
        await new Promise((resolve) => setTimeout(resolve, 0)); // 2 and 3 gather meanwhile
        answerNow(items);
        const from = Date.now();
        await behind.until(2, 1000);
        waited = Date.now() - from;
        return items;
      },
    });
    await Promise.all([call("p", 1), call("p", 2), call("p", 3)]);
    expect(waited).toBeGreaterThanOrEqual(0);
    expect(waited).toBeLessThan(500);
  });

  test("a run sees the items gathering behind it, and may wait for some of them, or for a while", async () => {
    const seen: number[][] = [];
    const waits: number[] = [];
    let finishFirst = () => {};
    let answerFirst = () => {};
    const call = grouped<number, number>({
      maxItems: 10,
      run: async (_, items, answerNow, behind) => {
        if (items[0] === 1) {
          await new Promise<void>((resolve) => {
            answerFirst = resolve;
          });
          return items;
        }
        if (items[0] !== 2) return items;
        answerNow(items);
        const from = Date.now();
        await behind.until(2, 1000);
        seen.push([...behind.items()]);
        waits.push(Date.now() - from);
        await new Promise<void>((resolve) => {
          finishFirst = resolve;
        });
        await behind.until(5, 30);
        seen.push([...behind.items()]);
        waits.push(Date.now() - from);
        return items;
      },
    });
    const tick = () => new Promise((resolve) => setTimeout(resolve, 0));
    void call("p", 1);
    void call("p", 2);
    void call("p", 3);
    answerFirst(); // [2, 3] runs next
    await tick();
    void call("p", 4);
    await tick();
    expect(seen).toEqual([]); // one of two gathered: still waiting
    void call("p", 5);
    await tick();
    expect(seen).toEqual([[4, 5]]);
    expect(waits[0]).toBeLessThan(500);
    finishFirst();
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(seen).toEqual([
      [4, 5],
      [4, 5],
    ]); // no fifth came: the wait ended after its 30 ms
    expect(waits[1]).toBeGreaterThanOrEqual(29);
  });

  test("a full group runs at once, and one past `fits` starts a group of its own", () => {
    const sumUnder10 = (gathered: readonly number[], item: number) =>
      gathered.reduce((sum, i) => sum + i, item) < 10;
    const { call, runs } = recording(2, sumUnder10);
    for (const item of [1, 2, 3, 4, 8]) void call("p", item);
    expect(runs.map((r) => r.items)).toEqual([[1], [2, 3], [4]]);
  });
});
