import { z } from "zod";

const schema = z.object({
  DATABASE_URL: z.url(),
  RELAY_CONTROL_HOST: z.string().default("127.0.0.1"),
  RELAY_CONTROL_PORT: z.coerce.number().int().min(0).max(65535).default(8788),
  RELAY_ADMIN_TOKEN: z.string().min(32, "RELAY_ADMIN_TOKEN must be at least 32 characters"),
  RELAY_EDGE_TOKEN: z.string().min(32, "RELAY_EDGE_TOKEN must be at least 32 characters"),
});

export type ControlConfig = z.infer<typeof schema>;

export function loadControlConfig(env: Record<string, string | undefined>): ControlConfig {
  return schema.parse(env);
}
