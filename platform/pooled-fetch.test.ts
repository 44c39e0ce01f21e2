import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { pooledFetch, pooledWholeFetch } from "./pooled-fetch.ts";

/** What the server saw of the last call. */
let seen: { method: string; headers: IncomingMessage["headers"]; body: string } | undefined;
const routes: Record<string, (res: ServerResponse) => void> = {
  "/json": (res) => {
    res.setHeader("set-cookie", ["a=1", "b=2"]);
    res.writeHead(201, { "content-type": "application/json", "x-answer": "yes" });
    res.end('{"ok":true}');
  },
  "/empty": (res) => {
    res.writeHead(204);
    res.end();
  },
  "/never": () => {},
};
const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    seen = {
      method: req.method ?? "",
      headers: req.headers,
      body: Buffer.concat(chunks).toString(),
    };
    routes[req.url ?? ""]?.(res);
  });
});
let base = "";
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

test("the whole-answer fetch sends and answers as fetch does: method, headers, body, status, headers, JSON", async () => {
  const init = {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer t" },
    body: '{"order":7}',
  };
  const answers = [];
  for (const call of [pooledFetch(1), pooledWholeFetch(1)]) {
    const answer = await call(`${base}/json`, init);
    answers.push({
      seen: { ...seen, headers: { ...seen?.headers, host: undefined, connection: undefined } },
      status: answer.status,
      ok: answer.ok,
      type: answer.headers.get("content-type"),
      own: answer.headers.get("x-answer"),
      cookies: answer.headers.getSetCookie(),
      json: await answer.json(),
    });
  }
  const [fromFetch, whole] = answers;
  expect(whole).toMatchObject({
    status: 201,
    ok: true,
    json: { ok: true },
    cookies: ["a=1", "b=2"],
  });
  expect(whole?.seen).toMatchObject({ method: "POST", body: '{"order":7}' });
  expect(whole?.seen.headers).toMatchObject({ authorization: "Bearer t" });
  // fetch adds headers of its own (accept, user-agent, sec-fetch-mode...); what Relay set is alike.
  const { "content-type": type, authorization } = fromFetch?.seen.headers ?? {};
  expect({ type, authorization }).toEqual({
    type: whole?.seen.headers["content-type"],
    authorization: whole?.seen.headers.authorization,
  });
  expect({ ...fromFetch, seen: undefined }).toEqual({ ...whole, seen: undefined });
});

test("an answer with no body is a Response with none, and bytes go as a body too", async () => {
  const answer = await pooledWholeFetch()(`${base}/empty`, {
    method: "POST",
    body: new TextEncoder().encode("bytes"),
  });
  expect(answer.status).toBe(204);
  expect(answer.body).toBeNull();
  expect(seen?.body).toBe("bytes");
});

test("the caller's signal ends a call that waits for its answer, and a refused connection fails", async () => {
  const abort = new AbortController();
  const waiting = pooledWholeFetch()(`${base}/never`, { signal: abort.signal });
  setTimeout(() => abort.abort(), 50);
  await expect(waiting).rejects.toThrow(/abort/i);
  await expect(pooledWholeFetch()("http://127.0.0.1:9/x")).rejects.toThrow();
});
