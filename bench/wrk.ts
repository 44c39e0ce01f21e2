/** Runs wrk (a load generator in its own process) and reads its latency distribution. */
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";

export interface WrkResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  errors: number;
}

const SCRIPT = `
wrk.method = "POST"
wrk.body = '{"bench":true}'
wrk.headers["Content-Type"] = "application/json"
local host = os.getenv("BENCH_HOST")
if host and host ~= "" then wrk.headers["Host"] = host end
local auth = os.getenv("BENCH_AUTH")
if auth and auth ~= "" then wrk.headers["Authorization"] = auth end
`;

function toMs(value: string): number {
  const match = /^([\d.]+)(us|ms|s)$/.exec(value.trim());
  if (!match) throw new Error(`unreadable wrk latency ${value}`);
  const n = Number(match[1]);
  return match[2] === "us" ? n / 1000 : match[2] === "s" ? n * 1000 : n;
}

export async function wrk(
  dir: string,
  url: string,
  options: { connections: number; seconds: number; host?: string; auth?: string },
): Promise<WrkResult> {
  const script = join(dir, "post.lua");
  await writeFile(script, SCRIPT);
  const { stdout } = await promisify(execFile)(
    "wrk",
    ["-t1", `-c${options.connections}`, `-d${options.seconds}s`, "--latency", "-s", script, url],
    { env: { ...process.env, BENCH_HOST: options.host ?? "", BENCH_AUTH: options.auth ?? "" } },
  );
  const percentile = (p: string) =>
    toMs(new RegExp(`^\\s+${p}%\\s+(\\S+)`, "m").exec(stdout)?.[1] ?? "");
  return {
    requestsPerSecond: Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1] ?? 0),
    p50Ms: percentile("50"),
    p99Ms: percentile("99"),
    errors:
      Number(/Non-2xx or 3xx responses: (\d+)/.exec(stdout)?.[1] ?? 0) +
      Number(/Socket errors: connect (\d+)/.exec(stdout)?.[1] ?? 0),
  };
}
