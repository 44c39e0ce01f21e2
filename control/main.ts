/** The control plane process: migrate, then serve on one port. */
import { credentialsFrom } from "./auth.ts";
import { loadControlConfig } from "./config.ts";
import { connect } from "./db/client.ts";
import { migrate } from "./db/migrate.ts";
import { createControlServer } from "./server.ts";

const config = loadControlConfig(process.env);
const sql = connect(config.DATABASE_URL);
await migrate(sql);
const server = createControlServer({ sql, now: () => new Date() }, await credentialsFrom(config));
server.listen(config.RELAY_CONTROL_PORT, config.RELAY_CONTROL_HOST, () => {
  console.log(
    JSON.stringify({
      msg: "control plane listening",
      url: `http://${config.RELAY_CONTROL_HOST}:${config.RELAY_CONTROL_PORT}`,
    }),
  );
});

const shutdown = () => {
  server.close();
  void sql.end({ timeout: 5 }).then(() => process.exit(0));
};
process.once("SIGTERM", shutdown);
process.once("SIGINT", shutdown);
