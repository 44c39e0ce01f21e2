/** `npm start`: the whole stack on embedded defaults, the demo project seeded once. */
import { resolve } from "node:path";
import { z } from "zod";
import { ConfigError, parseEnv } from "../core/env.ts";
import { portFree } from "./ports.ts";
import { StartError } from "./processes.ts";
import { DEMO, seedDemo } from "./seed.ts";
import { defaultPorts, startStack } from "./stack.ts";
import { temporalServerKind } from "./temporal-server.ts";

const port = z.coerce.number().int().min(1).max(65535);
const envSchema = z.object({
  DATABASE_URL: z.url().optional(),
  TEMPORAL_ADDRESS: z.string().optional(),
  TEMPORAL_HTTP_ADDRESS: z.url().optional(),
  // In the directory it starts from (npm start: the repository), never inside the build.
  RELAY_DATA_DIR: z.string().default(resolve(".relay")),
  RELAY_POSTGRES_PORT: port.default(defaultPorts.postgres),
  RELAY_CONTROL_PORT: port.default(defaultPorts.control),
  RELAY_EDGE_PORT: port.default(defaultPorts.edge),
  RELAY_DEMO_PORT: port.default(defaultPorts.demo),
  RELAY_WORKER_PORT: port.default(defaultPorts.worker),
  RELAY_TEMPORAL_PORT: port.default(defaultPorts.temporal.grpc),
  RELAY_TEMPORAL_HTTP_PORT: port.default(defaultPorts.temporal.http),
  RELAY_TEMPORAL_UI_PORT: port.default(defaultPorts.temporal.ui),
  RELAY_TEMPORAL_SERVER: temporalServerKind,
});

try {
  await main(parseEnv(envSchema, process.env));
} catch (error) {
  // What a user can fix is said plainly; anything else keeps its stack for a bug report.
  const fixable = error instanceof StartError || error instanceof ConfigError;
  console.error(fixable ? error.message : error);
  console.error("Relay did not start.");
  process.exit(1);
}

/** Why no Temporal UI link is printed. */
function temporalUiNote(env: z.infer<typeof envSchema>): string {
  if (env.TEMPORAL_ADDRESS) return "(external Temporal)";
  return "(none: Temporal's own server serves no UI; the dev server does)";
}

/** Every port this start will bind, with the variable that moves it. */
async function assertPortsFree(env: z.infer<typeof envSchema>) {
  const wanted: [number, string, string][] = [
    [env.RELAY_EDGE_PORT, "edge", "RELAY_EDGE_PORT"],
    [env.RELAY_CONTROL_PORT, "control plane", "RELAY_CONTROL_PORT"],
    [env.RELAY_DEMO_PORT, "demo receiver", "RELAY_DEMO_PORT"],
    [env.RELAY_WORKER_PORT, "worker", "RELAY_WORKER_PORT"],
  ];
  if (!env.DATABASE_URL) wanted.push([env.RELAY_POSTGRES_PORT, "Postgres", "RELAY_POSTGRES_PORT"]);
  if (!env.TEMPORAL_ADDRESS) {
    wanted.push(
      [env.RELAY_TEMPORAL_PORT, "Temporal", "RELAY_TEMPORAL_PORT"],
      [env.RELAY_TEMPORAL_HTTP_PORT, "Temporal HTTP API", "RELAY_TEMPORAL_HTTP_PORT"],
    );
    if (env.RELAY_TEMPORAL_SERVER === "dev") {
      wanted.push([env.RELAY_TEMPORAL_UI_PORT, "Temporal UI", "RELAY_TEMPORAL_UI_PORT"]);
    }
  }
  for (const [number, what, variable] of wanted) {
    if (!(await portFree(number))) {
      throw new StartError(
        `Port ${number} (${what}) is in use. Stop what listens there, or set ${variable} to a free port.`,
      );
    }
  }
}

async function main(env: z.infer<typeof envSchema>) {
  await assertPortsFree(env);
  console.log("Starting Relay...");
  const stack = await startStack({
    dir: env.RELAY_DATA_DIR,
    ports: {
      postgres: env.RELAY_POSTGRES_PORT,
      temporal: {
        grpc: env.RELAY_TEMPORAL_PORT,
        http: env.RELAY_TEMPORAL_HTTP_PORT,
        ui: env.RELAY_TEMPORAL_UI_PORT,
      },
      control: env.RELAY_CONTROL_PORT,
      edge: env.RELAY_EDGE_PORT,
      worker: env.RELAY_WORKER_PORT,
      demo: env.RELAY_DEMO_PORT,
    },
    output: "inherit",
    temporalServer: env.RELAY_TEMPORAL_SERVER,
    external: {
      databaseUrl: env.DATABASE_URL,
      temporalAddress: env.TEMPORAL_ADDRESS,
      temporalHttpAddress: env.TEMPORAL_HTTP_ADDRESS,
    },
    // A crashed process comes back (the supervisor says so); one that keeps crashing stops all.
    supervise: {
      onGiveUp: (reason) => {
        console.error(`Relay stopped: ${reason}. Its log lines above say why.`);
        process.exit(1);
      },
    },
  });

  const seed = await seedDemo({
    controlUrl: stack.controlUrl,
    adminToken: stack.secrets.adminToken,
    demoUrl: stack.demoUrl,
  });
  const inbound = `http://${DEMO.project}.localhost:${env.RELAY_EDGE_PORT}/${DEMO.line}/${DEMO.endpoint}`;
  const lines = [
    "",
    "Relay is running.",
    `  Edge (inbound):   http://{project}.localhost:${env.RELAY_EDGE_PORT}/{line}/{endpoint}`,
    `  Panel:            ${stack.controlUrl}/  (sign in with a member token)`,
    `  Control plane:    ${stack.controlUrl}  (REST, Connect, gRPC, gRPC-Web)`,
    `  Temporal UI:      ${stack.temporal.uiUrl ?? temporalUiNote(env)}`,
    `  Codec sign-in:    ${stack.controlUrl}/codec  (operators: the UI decodes payloads after it)`,
    `  Admin token:      in ${env.RELAY_DATA_DIR}/secrets.json`,
  ];
  if (seed) {
    lines.push(
      "",
      "Seeded the demo project. These secrets are shown once; copy them now.",
      `  Owner token:      ${seed.ownerToken}`,
      `  Live API key:     ${seed.liveKey}`,
      "",
      "Try it:",
      `  curl -X POST ${inbound} \\`,
      `    -H 'Authorization: Bearer ${seed.liveKey}' \\`,
      `    -H 'Content-Type: application/json' -d '{"hello":"relay"}'`,
    );
  } else {
    lines.push(
      "",
      "The demo project exists already (its owner token and key were shown at its first start).",
      `  Inbound URL:      ${inbound}`,
    );
  }
  lines.push("", "Ctrl-C stops everything.");
  console.log(lines.join("\n"));

  // Ctrl-C reaches tsx and this process both; the second signal must not cut the shutdown short.
  let stopping = false;
  const shutdown = () => {
    if (stopping) return;
    stopping = true;
    console.log("Stopping Relay...");
    void stack.stop().then(() => process.exit(0));
  };
  process.on("SIGINT", shutdown);
  process.on("SIGTERM", shutdown);
}
