import { expect, test } from "vitest";
import { OperatorSessions, SESSION_SECONDS } from "./operator-session.ts";

const secret = "ab".repeat(32);
const tokens = ["radm_the-admin-token-of-this-deployment", "ropr_the-operator-token-of-it"];
const now = new Date("2026-05-01T08:00:00Z");
const later = (seconds: number) => new Date(now.getTime() + seconds * 1000);

test("a session is valid until its expiry, twelve hours on, and not after", async () => {
  const sessions = await OperatorSessions.fromSecrets(secret, tokens);
  const session = await sessions.issue(now);
  expect(session.expiresAt).toEqual(later(SESSION_SECONDS));
  expect(await sessions.expiresAt(session.value, now)).toEqual(session.expiresAt);
  expect(await sessions.expiresAt(session.value, later(SESSION_SECONDS - 1))).toEqual(
    session.expiresAt,
  );
  expect(await sessions.expiresAt(session.value, later(SESSION_SECONDS))).toBeNull();
});

test("a session carries no token, and a moved expiry or a changed MAC is no session", async () => {
  const sessions = await OperatorSessions.fromSecrets(secret, tokens);
  const { value } = await sessions.issue(now);
  for (const token of tokens) expect(value).not.toContain(token);
  const [version, expiry, nonce, mac = ""] = value.split(".");
  expect(
    await sessions.expiresAt(`${version}.${Number(expiry) + 1}.${nonce}.${mac}`, now),
  ).toBeNull();
  const flipped = `${mac.slice(0, -1)}${mac.endsWith("A") ? "B" : "A"}`;
  expect(await sessions.expiresAt(`${version}.${expiry}.${nonce}.${flipped}`, now)).toBeNull();
  for (const garbage of ["", "v1", "v2...", "v2.1.x.y", `${value}.extra`]) {
    expect(await sessions.expiresAt(garbage, now)).toBeNull();
  }
});

test("two sessions issued in the same second are two sessions", async () => {
  const sessions = await OperatorSessions.fromSecrets(secret, tokens);
  const [one, two] = [await sessions.issue(now), await sessions.issue(now)];
  expect(one.value).not.toBe(two.value);
  expect(await sessions.expiresAt(two.value, now)).toEqual(two.expiresAt);
});

test("another deployment secret, or a new operator token, ends every session", async () => {
  const { value } = await (await OperatorSessions.fromSecrets(secret, tokens)).issue(now);
  const otherSecret = await OperatorSessions.fromSecrets("cd".repeat(32), tokens);
  const newToken = await OperatorSessions.fromSecrets(secret, [tokens[0] ?? "", "ropr_a-new-one"]);
  expect(await otherSecret.expiresAt(value, now)).toBeNull();
  expect(await newToken.expiresAt(value, now)).toBeNull();
});
