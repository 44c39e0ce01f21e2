/**
 * Delivery control per target, for owners and editors: each target's circuit (state, waiting
 * deliveries, history), a pause by hand for one target or a whole endpoint, and a disabled
 * target enabled again. Letting deliveries go is the target's circuit workflow's work: a resume
 * or an enable wakes it (platform/temporal.ts `wakeCircuit`), and it drains them at a bounded rate.
 */
import { RelayError } from "../../core/errors.ts";
import { wakeCircuit } from "../../platform/temporal.ts";
import { waitForEdgesToCatchUp } from "../../store/changes.ts";
import * as circuits from "../../store/circuits.ts";
import { endpointTargets } from "../../store/routing.ts";
import { type Ctx, projectAccess } from "./context.ts";

export type { CircuitView as TargetCircuit } from "../../store/circuits.ts";

interface EndpointRef {
  line: string;
  path: string;
}

async function endpointOf(ctx: Ctx, slug: string, { line, path }: EndpointRef) {
  const access = await projectAccess(ctx, slug);
  const endpoint = await endpointTargets(ctx.sql, access.projectId, line, path);
  if (!endpoint) throw new RelayError("not_found", `no endpoint '${line}/${path}'`);
  return endpoint;
}

async function targetOf(ctx: Ctx, slug: string, ref: EndpointRef, name: string) {
  const endpoint = await endpointOf(ctx, slug, ref);
  const targetId = endpoint.targets.get(name);
  if (!targetId)
    throw new RelayError("not_found", `no target '${name}' on '${ref.line}/${ref.path}'`);
  return { ...endpoint, targetId };
}

async function circuitsView(ctx: Ctx, endpoint: { endpointId: string }) {
  return { targets: await circuits.circuitsOf(ctx.sql, endpoint.endpointId) };
}

/** Wakes the circuit workflow of each target: its waiting deliveries may go. */
async function letGo(ctx: Ctx, targetIds: string[]): Promise<void> {
  const client = await ctx.temporal();
  await Promise.all(targetIds.map((id) => wakeCircuit(client, id)));
}

/**
 * A pause, resume or enable answers once every edge has seen it (a call to a held target takes
 * its place under the cap as it is accepted) and the circuits of the targets let go are woken.
 */
async function movedSeen(ctx: Ctx, letGoTargetIds: string[]): Promise<void> {
  await waitForEdgesToCatchUp(ctx.sql);
  if (letGoTargetIds.length > 0) await letGo(ctx, letGoTargetIds);
}

export async function getCircuits(ctx: Ctx, slug: string, ref: EndpointRef) {
  return circuitsView(ctx, await endpointOf(ctx, slug, ref));
}

export async function pauseEndpoint(ctx: Ctx, slug: string, ref: EndpointRef, paused: boolean) {
  const endpoint = await endpointOf(ctx, slug, ref);
  const changed = await circuits.pauseEndpoint(ctx.sql, endpoint.endpointId, paused);
  if (changed) await movedSeen(ctx, paused ? [] : changed);
  return circuitsView(ctx, endpoint);
}

export async function pauseTarget(
  ctx: Ctx,
  slug: string,
  ref: EndpointRef,
  name: string,
  paused: boolean,
) {
  const target = await targetOf(ctx, slug, ref, name);
  const changed = await circuits.pauseTarget(ctx.sql, target.targetId, paused);
  if (changed) await movedSeen(ctx, paused ? [] : [target.targetId]);
  return circuitsView(ctx, target);
}

export async function enableTarget(ctx: Ctx, slug: string, ref: EndpointRef, name: string) {
  const target = await targetOf(ctx, slug, ref, name);
  if (await circuits.enableTarget(ctx.sql, target.targetId)) {
    await movedSeen(ctx, [target.targetId]);
  }
  return circuitsView(ctx, target);
}
