/**
 * Bare workflows for the Temporal ceiling probe (bench/temporal-ceiling.ts), one per shape: they
 * do nothing but the round trips their shape costs Temporal, so their rate is the server's.
 */
import { proxyActivities, proxyLocalActivities } from "@temporalio/workflow";
import { setStatus } from "../workflows/status.ts";
import type * as activities from "./ceiling-activities.ts";

const { noop } = proxyActivities<typeof activities>({ startToCloseTimeout: "10 seconds" });
const local = proxyLocalActivities<typeof activities>({ startToCloseTimeout: "10 seconds" });

export async function noActivity(): Promise<void> {}

export async function oneLocalActivity(): Promise<void> {
  await local.noop();
}

export async function oneActivity(): Promise<void> {
  await noop();
}

/**
 * A batch's shape (issue 27's probe, bench/batch-probe.ts): `items` local activities at once, in
 * the workflow's first task, as a batch of first attempts would make them.
 */
export async function localActivities(items: number): Promise<void> {
  await Promise.all(Array.from({ length: items }, () => local.noop()));
}

/** The shape of `deliverRequest` today: a local activity, then three activities in turn. */
export async function localAndThreeActivities(): Promise<void> {
  await local.noop();
  await noop();
  await noop();
  await noop();
}

/**
 * One local activity, answering when it ran (bench/sync-gap.ts); with `setsStatus`, the request
 * status search attribute set at the end, as a sync call's workflow sets it. `_input` stands for
 * a sync call's input: carried, not read.
 */
export async function stampedLocalActivity(setsStatus = false, _input?: string): Promise<number> {
  const ran = await local.stamp();
  if (setsStatus) setStatus("delivered");
  return ran;
}
