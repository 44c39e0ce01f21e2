/**
 * A request id Relay has answered is readable at once, over REST and Connect: before the worker
 * opens its log entry it reads as queued (or scheduled), never 404. Only to its own project.
 */
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, expect, test } from "vitest";
import { RequestLogService, RequestStatus } from "../gen/relay/v1/requests_pb.ts";
import {
  api,
  memberClient,
  newProject,
  projectWithEndpoint,
  relay,
  targetServer,
} from "./helpers.ts";

const sink = await targetServer();
afterAll(() => sink.close());

const CALLS = 40;

test("each of many requests reads at once after its 202, over REST and Connect, never 404", async () => {
  const p = await projectWithEndpoint([{ name: "sink", targetUrl: sink.url }]);
  const client = memberClient(RequestLogService, p.ownerToken);
  const other = await newProject();
  const reads = await Promise.all(
    Array.from({ length: CALLS }, async (_, i) => {
      const delayed = i % 4 === 0;
      const answer = await relay(p.slug, "/v1/hook", {
        key: p.key,
        body: `{"i":${i}}`,
        ...(delayed && { headers: { "Relay-Delay": "1h" } }),
      });
      expect(answer.status).toBe(202);
      const { requestId, status } = answer.json();
      expect(status).toBe(delayed ? "scheduled" : "queued");
      const rest = await api(p.ownerToken, "GET", `${p.base}/requests/${requestId}`);
      const connect = await client.getRequest({ project: p.slug, requestId }).catch((e) => e);
      const elsewhere = await api(
        other.ownerToken,
        "GET",
        `/projects/${other.slug}/requests/${requestId}`,
      );
      return { delayed, requestId, rest, connect, elsewhere: elsewhere.status };
    }),
  );
  for (const { delayed, requestId, rest, connect, elsewhere } of reads) {
    expect(rest.status, rest.text).toBe(200);
    expect(rest.body).toMatchObject({ requestId, line: "v1", endpoint: "hook" });
    const restStatus = rest.body.status as string;
    if (delayed) expect(restStatus).toBe("scheduled");
    else expect(["queued", "delivering", "delivered"]).toContain(restStatus);
    expect(connect).not.toBeInstanceOf(ConnectError);
    expect(connect.request.requestId).toBe(requestId);
    expect(connect.request.status).not.toBe(RequestStatus.UNSPECIFIED);
    expect(elsewhere).toBe(404);
  }
  // No read ever showed the project another's request, nor a request of another's as its own.
  const unknown = await client
    .getRequest({ project: p.slug, requestId: "req_unknown" })
    .catch((e) => e);
  expect(unknown).toBeInstanceOf(ConnectError);
  expect((unknown as ConnectError).code).toBe(Code.NotFound);
}, 120_000);
