/** The Node adapter: the dispatcher that reaches targets, and the response write loop. */
import { createServer, type Server } from "node:http";
import { connect } from "node:net";
import { fetch } from "undici";
import { afterAll, expect, test } from "vitest";
import { ownListeners } from "../core/listeners.ts";
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
