/**
 * The cluster bench/scale-faults.ts kills parts of: a second control plane, worker and edge
 * beside the stack's own, all supervised; Temporal's server found by its config file; when a
 * killed process serves again; and what the supervisors and Temporal say afterwards.
 */
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Client, Connection } from "@temporalio/client";
import postgres from "postgres";
import { request } from "undici";
import { defaultRestartPolicy, logFile, ManagedProcess } from "../dev/processes.ts";
import type { Stack } from "../dev/stack.ts";
import type { MadeAgain } from "./fault-mix.ts";
import { type Cleanup, stackEnv } from "./harness.ts";

/** The second control plane, worker and edge, supervised as the stack's own processes are. */
export async function startSecondOfEach(
  cleanup: Cleanup,
  dir: string,
  stack: Stack,
  options: {
    control: number;
    worker: number;
    edge: number;
    listeners: number[];
    edgeDomain: string;
    onGiveUp(reason: string): void;
  },
) {
  const shared = {
    ...stackEnv(stack),
    RELAY_ALLOW_PRIVATE_TARGETS: "1",
    RELAY_EDGE_DOMAIN: options.edgeDomain,
    RELAY_EDGE_LISTENERS: options.listeners.map((p) => `127.0.0.1:${p}`).join(","),
  };
  const output = logFile(join(dir, "second.log"));
  const managed = (name: string, entry: string, readyLine: string, env: Record<string, string>) => {
    const process = new ManagedProcess(
      { name, entry, readyLine, env: { ...shared, ...env } },
      output,
    );
    cleanup.add(() => process.stop());
    process.supervise({ ...defaultRestartPolicy, onGiveUp: options.onGiveUp });
    return process;
  };
  const second = {
    control: managed("control-2", "control/main.ts", "control plane listening", {
      RELAY_CONTROL_PORT: String(options.control),
    }),
    worker: managed("worker-2", "workflows/worker.ts", "worker polling", {
      RELAY_WORKER_PORT: String(options.worker),
    }),
    edge: managed("edge-2", "edge/main.ts", "edge listening", {
      RELAY_EDGE_PORT: String(options.edge),
      RELAY_CONTROL_URL: `http://127.0.0.1:${options.control}`,
    }),
  };
  await second.control.start();
  await Promise.all([second.worker.start(), second.edge.start()]);
  return second;
}

/** Temporal's own server of the stack in `dir`: the process started with its config file. */
export async function temporalServerPid(dir: string): Promise<number | null> {
  const config = join(dir, "temporal-server.yaml");
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, "utf8").catch(() => "");
    if (cmdline.split("\0").includes(config)) return Number(entry);
  }
  return null;
}

/** Resolves once `health` answers 200 again: a process killed a moment ago is back. */
export async function servingAgain(health: string): Promise<void> {
  await sleep(300);
  const serves = () =>
    request(health).then(
      async (r) => {
        await r.body.dump();
        return r.statusCode === 200;
      },
      () => false,
    );
  while (!(await serves())) await sleep(200);
}

/** The supervisors' restart lines of the run, from every log in `dir`. */
export async function supervisorRestarts(dir: string): Promise<string[]> {
  const lines: string[] = [];
  for (const file of ["stack.log", "second.log"]) {
    const text = await readFile(join(dir, file), "utf8").catch(() => "");
    for (const line of text.split("\n")) {
      if (line.startsWith("[supervisor]") && line.includes("restarting in")) {
        lines.push(line.replace(/; restarting in.*/, "").replace("[supervisor] ", ""));
      }
    }
  }
  return lines;
}

/** Workflows of `type` on the stack's Temporal (its visibility). */
export async function countWorkflows(stack: Stack, type: string): Promise<number> {
  const connection = await Connection.connect({ address: stack.temporal.address });
  try {
    const client = new Client({ connection });
    return (await client.workflow.count(`WorkflowType = "${type}"`)).count;
  } finally {
    await connection.close();
  }
}

/**
 * Deliveries made again, by what the request log shows of them: "a 2xx was logged before" (Relay
 * knew it had delivered, and sent again: no cause) or "an earlier outcome was lost" (an attempt
 * whose worker or task died mid-call: at-least-once's cause).
 */
export async function madeAgainByCause(
  databaseUrl: string,
  again: MadeAgain[],
): Promise<Map<string, number>> {
  const causes = new Map<string, number>();
  if (again.length === 0) return causes;
  const sql = postgres(databaseUrl, { max: 1 });
  try {
    const rows = await sql<{ requestId: string; target: string; delivered: number }[]>`
      select request_id as "requestId", target_name as target,
        count(*) filter (where status_code between 200 and 299)::int as delivered
      from attempts where request_id = any(${again.map((d) => d.requestId)}::text[])
        and replay = 0
      group by request_id, target_name`;
    const logged = new Map(rows.map((r) => [`${r.requestId} ${r.target}`, r.delivered]));
    for (const { requestId, target } of again) {
      const cause =
        (logged.get(`${requestId} ${target}`) ?? 0) > 1
          ? "a 2xx was logged before (no cause)"
          : "an earlier outcome was lost";
      causes.set(cause, (causes.get(cause) ?? 0) + 1);
    }
    return causes;
  } finally {
    await sql.end();
  }
}

/** The parts of the control plane's answers the run reads. */
interface ManagementAnswer {
  ownerToken: string;
  plaintext: string;
  key: { id: string };
}

/** Management calls, each to either control plane in turn: one may be down. */
export function managerOf(controlUrls: string[]) {
  return async (token: string, method: string, path: string, body?: unknown) => {
    for (let tries = 0; ; tries++) {
      const url = `${controlUrls[tries % controlUrls.length]}${path}`;
      const answer = await request(url, {
        method: method as "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        ...(body !== undefined && { body: JSON.stringify(body) }),
      }).then(
        async (r) => ({ status: r.statusCode, body: (await r.body.json()) as ManagementAnswer }),
        () => null,
      );
      if (answer && answer.status < 300) return answer.body;
      if ((answer && answer.status < 500) || tries > 40) {
        throw new Error(`${method} ${path}: ${JSON.stringify(answer)}`);
      }
      await sleep(500);
    }
  };
}
