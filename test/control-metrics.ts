/** What the control plane's Prometheus metrics say it answered, for tests that count its calls. */
import { request } from "undici";
import { stack } from "./helpers.ts";

/** How many times the control plane answered this EdgeService RPC, by its metrics. */
export async function edgeCalls(method: string): Promise<number> {
  const text = await (await request(`${stack().controlUrl}/metrics`)).body.text();
  const series = text
    .split("\n")
    .filter((line) =>
      line.startsWith(
        `relay_control_calls_total{protocol="rpc",route="relay.v1.EdgeService/${method}"`,
      ),
    );
  return series.reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}
