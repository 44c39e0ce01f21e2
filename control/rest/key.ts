/**
 * The Keys routes (a project's API keys): each REST contract beside the operation it calls, as
 * control/connect/key.ts serves the same operations over Connect.
 */
import * as answers from "../api/answers.ts";
import * as keys from "../api/keys.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const keyRoutes: Route[] = tagged("Keys", [
  route(
    "GET",
    `${base}/keys`,
    {
      operationId: "listKeys",
      summary: "The project's API keys",
      access: "editor",
      answer: answers.keyList,
    },
    ({ ctx, params }) => keys.listKeys(ctx, p(params).project).then((list) => ({ keys: list })),
  ),
  route(
    "POST",
    `${base}/keys`,
    {
      operationId: "mintKey",
      summary: "Mint an API key; its plaintext is shown this once",
      access: "editor",
      body: keys.mintKeyBody,
      example: { name: "backend", mode: "live", ttlDays: 90 },
      answer: answers.issuedKey,
      errors: ["policy_violation", "limit_exceeded"],
    },
    ({ ctx, params, body }) => keys.mintKey(ctx, p(params).project, body),
  ),
  route(
    "POST",
    `${base}/keys/:keyId/rotate`,
    {
      operationId: "rotateKey",
      summary: "A linked successor; the key stays valid until its own expiry",
      access: "editor",
      answer: answers.issuedKey,
      errors: ["key_not_active", "limit_exceeded"],
    },
    ({ ctx, params }) => keys.rotateKey(ctx, p(params).project, p(params).keyId),
  ),
  route(
    "DELETE",
    `${base}/keys/:keyId`,
    {
      operationId: "revokeKey",
      summary: "Revoke a key, with no grace",
      description: "Answers once every edge refuses the key.",
      access: "editor",
      answer: answers.revokedKey,
      errors: ["key_not_active"],
    },
    ({ ctx, params }) =>
      keys.revokeKey(ctx, p(params).project, p(params).keyId).then((key) => ({ key })),
  ),
  route(
    "POST",
    `${base}/keys/:keyId/reveal-successor`,
    {
      operationId: "revealSuccessor",
      summary: "The auto-rotated successor's plaintext, once",
      access: "editor",
      answer: answers.issuedKey,
      status: 200,
      errors: ["successor_already_revealed"],
    },
    ({ ctx, params }) => keys.revealSuccessor(ctx, p(params).project, p(params).keyId),
  ),
]);
