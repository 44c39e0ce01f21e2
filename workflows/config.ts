import { z } from "zod";

const schema = z.object({
  DATABASE_URL: z.url(),
  TEMPORAL_ADDRESS: z.string().default("127.0.0.1:7233"),
  TEMPORAL_NAMESPACE: z.string().default("default"),
  /** Temporal Cloud API key; when set, the connection uses TLS. */
  TEMPORAL_API_KEY: z.string().optional(),
});

export type WorkerConfig = z.infer<typeof schema>;

export function loadWorkerConfig(env: Record<string, string | undefined>): WorkerConfig {
  return schema.parse(env);
}
