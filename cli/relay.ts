#!/usr/bin/env node
/**
 * `relay <command>`: every Relay process behind one entry, from the build (`node
 * dist/cli/relay.js`, the package's `relay` bin) or from source (`npx tsx cli/relay.ts`). Each
 * command reads its own environment (docs/configuration.md); a missing or bad setting is printed
 * as one line per variable and the command exits 1, before anything starts.
 */
import { z } from "zod";
import { ConfigError, parseEnv, sharedEnv } from "../core/env.ts";

/** Each command: what it runs, and its module (imported only when asked for). */
const commands: Record<string, { about: string; run: () => Promise<unknown> }> = {
  edge: { about: "the edge on Node.js (edge/main.ts)", run: () => import("../edge/main.ts") },
  control: {
    about: "the control plane: migrates, then serves the API and the panel",
    run: () => import("../control/main.ts"),
  },
  worker: {
    about: "the delivery worker (workflows/worker.ts)",
    run: () => import("../workflows/worker.ts"),
  },
  migrate: {
    about: "applies the store's pending migrations to DATABASE_URL, then exits",
    run: migrateOnly,
  },
  start: {
    about: "the whole stack on one machine, as `npm start`",
    run: () => import("../dev/start.ts"),
  },
};

async function migrateOnly(): Promise<void> {
  const { DATABASE_URL } = parseEnv(
    z.object({ DATABASE_URL: sharedEnv.DATABASE_URL }),
    process.env,
  );
  // Imported here: only this command talks to Postgres itself.
  const [{ connect }, { migrate }] = await Promise.all([
    import("../store/db.ts"),
    import("../store/migrate.ts"),
  ]);
  const sql = connect(DATABASE_URL);
  try {
    const applied = await migrate(sql);
    console.log(applied.length ? `applied ${applied.join(", ")}` : "the schema is up to date");
  } finally {
    await sql.end({ timeout: 5 });
  }
}

const usage = [
  "usage: relay <command>",
  "",
  ...Object.entries(commands).map(([name, { about }]) => `  ${name.padEnd(8)} ${about}`),
  "",
  "Settings come from the environment: docs/configuration.md.",
].join("\n");

const [name, ...rest] = process.argv.slice(2);
const command = name === undefined ? undefined : commands[name];
if (name === "help" || name === "--help" || name === "-h") {
  console.log(usage);
} else if (!command || rest.length > 0) {
  console.error(
    name === undefined
      ? usage
      : `relay: unknown command "${[name, ...rest].join(" ")}"\n\n${usage}`,
  );
  process.exit(2);
} else {
  try {
    await command.run();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    for (const line of error.message.split("\n")) console.error(`relay ${name}: ${line}`);
    process.exit(1);
  }
}
