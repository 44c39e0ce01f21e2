import { expect, test } from "vitest";
import type { z } from "zod";
import { loadControlConfig } from "../control/config.ts";
import { loadEdgeConfig } from "../edge/config.ts";
import { loadWorkerConfig } from "../workflows/config.ts";
import {
  ConfigError,
  ENCRYPTION_KEY_HEX,
  envFlag,
  listenPort,
  payloadSecretsFrom,
  sharedEnv,
} from "./env.ts";

const KEY = "ab".repeat(32);
const TOKEN = "t".repeat(32);

/** The messages of the issues a schema finds in `value`. */
function refusals(schema: z.ZodType, value: unknown): string[] {
  const parsed = schema.safeParse(value);
  return parsed.success ? [] : parsed.error.issues.map((issue) => issue.message);
}

test("the encryption key is 64 hex characters, either case", () => {
  expect(ENCRYPTION_KEY_HEX.test(KEY)).toBe(true);
  expect(ENCRYPTION_KEY_HEX.test(KEY.toUpperCase())).toBe(true);
  expect(ENCRYPTION_KEY_HEX.test(KEY.slice(2))).toBe(false);
  expect(ENCRYPTION_KEY_HEX.test(`${KEY.slice(2)}zz`)).toBe(false);
  expect(refusals(sharedEnv.RELAY_ENCRYPTION_KEY, "short")).toEqual([
    "RELAY_ENCRYPTION_KEY must be 32 bytes as 64 hex characters",
  ]);
});

test("the edge token is at least 32 characters", () => {
  expect(refusals(sharedEnv.RELAY_EDGE_TOKEN, TOKEN)).toEqual([]);
  expect(refusals(sharedEnv.RELAY_EDGE_TOKEN, TOKEN.slice(1))).toEqual([
    "RELAY_EDGE_TOKEN must be at least 32 characters",
  ]);
});

test("a port is 0 to 65535, from text, with its default when unset", () => {
  expect(listenPort(8787).parse(undefined)).toBe(8787);
  expect(listenPort(8787).parse("0")).toBe(0);
  expect(listenPort(8787).parse("65535")).toBe(65535);
  expect(refusals(listenPort(1), "65536")).toHaveLength(1);
  expect(refusals(listenPort(1), "-1")).toHaveLength(1);
  expect(refusals(listenPort(1), "80.5")).toHaveLength(1);
});

test("a flag is on for 1 or true and off when unset", () => {
  expect(envFlag.parse("1")).toBe(true);
  expect(envFlag.parse("true")).toBe(true);
  expect(envFlag.parse(undefined)).toBe(false);
  expect(refusals(envFlag, "yes")).toHaveLength(1);
});

test("every process refuses a bad shared value with the same message", () => {
  const base = {
    DATABASE_URL: "postgres://relay@127.0.0.1/relay",
    RELAY_ADMIN_TOKEN: TOKEN,
    RELAY_EDGE_TOKEN: TOKEN,
    RELAY_ENCRYPTION_KEY: KEY,
  };
  const loaders = [loadControlConfig, loadWorkerConfig, loadEdgeConfig];
  for (const load of loaders) expect(() => load(base)).not.toThrow();
  for (const load of [loadControlConfig, loadWorkerConfig]) {
    expect(() => load({ ...base, RELAY_ENCRYPTION_KEY: "zz" })).toThrow(
      "RELAY_ENCRYPTION_KEY must be 32 bytes as 64 hex characters",
    );
  }
  for (const load of [loadControlConfig, loadEdgeConfig]) {
    expect(() => load({ ...base, RELAY_EDGE_TOKEN: "short" })).toThrow(
      "RELAY_EDGE_TOKEN must be at least 32 characters",
    );
  }
  for (const load of loaders) {
    expect(() => load({ ...base, RELAY_ALLOW_PRIVATE_TARGETS: "yes" })).toThrow();
    expect(() => load({ ...base, RELAY_METRICS_TOKEN: "" })).toThrow();
  }
});

test("the payload codec's secrets: RELAY_PAYLOAD_KEYS newest first, else RELAY_ENCRYPTION_KEY", () => {
  const base = {
    DATABASE_URL: "postgres://relay@127.0.0.1:5432/relay",
    RELAY_ADMIN_TOKEN: TOKEN,
    RELAY_EDGE_TOKEN: TOKEN,
    RELAY_ENCRYPTION_KEY: KEY,
  };
  const NEW = "cd".repeat(32);
  expect(payloadSecretsFrom(loadWorkerConfig(base))).toEqual([KEY]);
  expect(
    payloadSecretsFrom(loadControlConfig({ ...base, RELAY_PAYLOAD_KEYS: `${NEW}, ${KEY}` })),
  ).toEqual([NEW, KEY]);
  expect(() => loadWorkerConfig({ ...base, RELAY_PAYLOAD_KEYS: `${NEW},short` })).toThrow(
    "must be 64-hex-character secrets, comma-separated",
  );
});

test("a bad or missing setting is one line naming its variable, for every process", () => {
  const errorOf = (load: () => unknown) => {
    try {
      load();
    } catch (error) {
      return error;
    }
    return null;
  };
  const error = errorOf(() =>
    loadWorkerConfig({ RELAY_ENCRYPTION_KEY: "zz", RELAY_WORKER_PORT: "http" }),
  );
  expect(error).toBeInstanceOf(ConfigError);
  expect((error as ConfigError).message.split("\n")).toEqual([
    "DATABASE_URL is not set",
    "RELAY_WORKER_PORT: Invalid input: expected number, received NaN",
    "RELAY_ENCRYPTION_KEY must be 32 bytes as 64 hex characters",
  ]);
  expect((errorOf(() => loadEdgeConfig({})) as ConfigError).message).toBe(
    "RELAY_EDGE_TOKEN is not set",
  );
  expect((errorOf(() => loadControlConfig({})) as ConfigError).message.split("\n")).toEqual([
    "DATABASE_URL is not set",
    "RELAY_ADMIN_TOKEN is not set",
    "RELAY_EDGE_TOKEN is not set",
    "RELAY_ENCRYPTION_KEY is not set",
  ]);
  // A process's own cross-variable rule names the variable too.
  expect(
    (
      errorOf(() =>
        loadWorkerConfig({
          DATABASE_URL: "postgres://relay@127.0.0.1/relay",
          RELAY_ENCRYPTION_KEY: KEY,
          RELAY_PROJECT_SYNC_IN_FLIGHT: "500",
        }),
      ) as ConfigError
    ).message,
  ).toBe("RELAY_PROJECT_SYNC_IN_FLIGHT: must be at most RELAY_WORKER_SYNC_SLOTS");
});
