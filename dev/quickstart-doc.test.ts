import { expect, test } from "vitest";
import { docProblems } from "./quickstart-doc.ts";

test("docs/quickstart.md shows every example file as it is", async () => {
  expect(await docProblems()).toEqual([]);
});
