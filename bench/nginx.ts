/**
 * nginx `proxy_pass` in front of bench/relay.ts's target: the baseline a relay's added latency
 * is read against. One worker, keepalive to the target, no buffering (as a stream needs).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { portFree } from "../dev/ports.ts";
import { stopChild, waitFor } from "../dev/processes.ts";
import type { Cleanup } from "./harness.ts";

export async function startNginx(
  cleanup: Cleanup,
  dir: string,
  port: number,
  upstreamPort: number,
): Promise<void> {
  const conf = join(dir, "nginx.conf");
  await mkdir(join(dir, "nginx-logs"), { recursive: true });
  await writeFile(
    conf,
    `worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "nginx-logs", "error.log")} warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/nginx-body;
  proxy_temp_path ${dir}/nginx-proxy;
  upstream target { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://target;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const child: ChildProcess = spawn("nginx", ["-p", dir, "-c", conf, "-g", "daemon off;"], {
    stdio: "ignore",
  });
  // A spawn that fails (no binary, no permission) is an error to report, not an uncaught event.
  await once(child, "spawn");
  cleanup.add(() => stopChild(child));
  await waitFor(async () => {
    if (child.exitCode !== null)
      throw new Error(`nginx exited (${child.exitCode}); see ${dir}/nginx-logs`);
    return !(await portFree(port));
  }, 10_000);
}
