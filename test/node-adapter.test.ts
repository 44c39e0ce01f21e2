/** The Node adapter: the dispatcher that reaches targets, the body it hands over, and the response write loop. */
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { fetch } from "undici";
import { afterAll, expect, test } from "vitest";
import { ownListeners } from "../core/listeners.ts";
import { readCapped, TOO_LARGE } from "../core/read-capped.ts";
import { serveNode } from "../edge/adapters/node.ts";
import { targetDispatcher } from "../platform/targets.ts";

const servers: Server[] = [];
afterAll(() => Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve)))));

async function listen(server: Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as { port: number }).port;
}

test("the target dispatcher connects to no address the rules refuse: by name or by literal", async () => {
  let reached = 0;
  const port = await listen(
    createServer((_, res) => {
      reached++;
      res.end("ok");
    }),
  );
  const production = targetDispatcher({ allowPrivate: false });
  for (const host of ["localhost", "127.0.0.1", "[::ffff:127.0.0.1]"]) {
    const failure = await fetch(`http://${host}:${port}/`, { dispatcher: production }).then(
      () => null,
      (error: Error) => error.cause as Error,
    );
    expect(failure?.message, host).toMatch(/^target .+ refused: .+ is a loopback address$/);
  }
  expect(reached).toBe(0);

  const devStack = targetDispatcher({ allowPrivate: true });
  const answer = await fetch(`http://localhost:${port}/`, { dispatcher: devStack });
  expect(await answer.text()).toBe("ok");
  expect(reached).toBe(1);
  await Promise.all([production.close(), devStack.close()]);
});

test("the target dispatcher connects to no listener of the edge's, even where private targets are allowed", async () => {
  const reached: string[] = [];
  const server = (name: string) =>
    listen(
      createServer((_, res) => {
        reached.push(name);
        res.end(name);
      }),
    );
  const [edgePort, otherPort] = await Promise.all([server("edge"), server("other")]);
  const devStack = targetDispatcher({
    allowPrivate: true,
    ownListeners: ownListeners([{ address: "127.0.0.1", port: edgePort }], []),
  });
  for (const host of ["localhost", "127.0.0.1", "[::ffff:127.0.0.1]"]) {
    const failure = await fetch(`http://${host}:${edgePort}/`, { dispatcher: devStack }).then(
      () => null,
      (error: Error) => error.cause as Error,
    );
    expect(failure?.message, host).toMatch(
      new RegExp(`^target .+ refused: .+ port ${edgePort} is Relay's own edge$`),
    );
  }
  const other = await fetch(`http://localhost:${otherPort}/`, { dispatcher: devStack });
  expect(await other.text()).toBe("other");
  expect(reached).toEqual(["other"]);
  await devStack.close();
});

test("the answer's headers reach the caller as they are: each cookie, and a header named __proto__", async () => {
  const server = serveNode(
    async () => {
      const headers = new Headers([
        ["__proto__", "kept"],
        ["set-cookie", "a=1"],
        ["set-cookie", "b=2"],
      ]);
      return new Response("{}", { headers });
    },
    () => {},
  );
  const port = await listen(server);
  const answer = await fetch(`http://127.0.0.1:${port}/v1/hook`, { method: "POST" });
  expect(answer.headers.get("__proto__")).toBe("kept");
  expect(answer.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
});

test("a caller that stops reading and leaves ends the write loop: the body is cancelled", async () => {
  let cancelled = false;
  const chunk = new Uint8Array(64 * 1024);
  const server = serveNode(
    async () =>
      new Response(
        new ReadableStream<Uint8Array>({
          pull: (controller) => controller.enqueue(chunk),
          cancel: () => {
            cancelled = true;
          },
        }),
      ),
    () => {},
  );
  const port = await listen(server);
  const socket = connect(port, "127.0.0.1");
  socket.write("POST /v1/hook HTTP/1.1\r\nhost: a.localhost\r\ncontent-length: 0\r\n\r\n");
  // Read nothing, so the server's writes back up until it waits for 'drain'; then leave.
  socket.pause();
  await new Promise((resolve) => setTimeout(resolve, 300));
  socket.destroy();
  const deadline = Date.now() + 5000;
  while (!cancelled && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  expect(cancelled).toBe(true);
});

/** A handler that answers what it read of the body: its bytes, 413 past `limit`, or the error. */
const bodyEcho = (limit: number, failures: string[]) =>
  serveNode(
    async (request) => {
      const read = await readCapped(request.body, limit).catch((error: Error) => {
        failures.push(error.message);
        return null;
      });
      if (read === null) return new Response("failed", { status: 400 });
      if (read === TOO_LARGE) return new Response("too large", { status: 413 });
      return new Response(new TextDecoder().decode(read));
    },
    () => {},
  );

/** Writes `parts` to a raw connection `pauseMs` apart; answers what came back. */
async function sendInParts(port: number, parts: string[], pauseMs: number): Promise<string> {
  const socket = connect(port, "127.0.0.1");
  let answer = "";
  socket.on("data", (chunk) => {
    answer += chunk.toString();
  });
  for (const part of parts) {
    socket.write(part);
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
  socket.destroy();
  return answer;
}

test("a body arriving in pieces after the handler started is read whole, in order", async () => {
  const port = await listen(bodyEcho(1024, []));
  const head = "POST /v1/hook HTTP/1.1\r\nhost: a.localhost\r\ncontent-length: 13\r\n\r\n";
  const answer = await sendInParts(port, [head, '{"a":', "1,", '"b":2}'], 30);
  expect(answer).toMatch(/^HTTP\/1\.1 200/);
  expect(answer).toContain('{"a":1,"b":2}');
});

test("a caller hanging up mid-body fails the read; a body past the cap still gets its 413", async () => {
  const failures: string[] = [];
  const port = await listen(bodyEcho(8, failures));
  const head = (length: number) =>
    `POST /v1/hook HTTP/1.1\r\nhost: a.localhost\r\ncontent-length: ${length}\r\n\r\n`;
  await sendInParts(port, [head(100), '{"a":'], 30);
  const deadline = Date.now() + 2000;
  while (failures.length === 0 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 20));
  expect(failures).toEqual(["the caller hung up"]);
  const refused = await sendInParts(port, [head(10), "0123", "456789"], 30);
  expect(refused).toMatch(/^HTTP\/1\.1 413/);
});
