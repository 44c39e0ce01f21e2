/**
 * The Connect/gRPC/gRPC-Web face of the management API. Each method converts the protobuf
 * message to the same plain input the REST API parses, calls the one shared operation, and
 * converts the answer back; validation and rules live in the operations only.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  Code,
  type ConnectRouter,
  createContextKey,
  type HandlerContext,
  type Interceptor,
} from "@connectrpc/connect";
import {
  deliveryModes,
  type Endpoint,
  type KeyRecord,
  keyModes,
  plans,
  requestStatuses,
  roles,
} from "../core/model.ts";
import { Health } from "../gen/grpc/health/v1/health_pb.ts";
import { ServerReflection } from "../gen/grpc/reflection/v1/reflection_pb.ts";
import { EdgeService } from "../gen/relay/v1/edge_pb.ts";
import { KeyService } from "../gen/relay/v1/keys_pb.ts";
import { MemberService, PolicyService, ProjectService } from "../gen/relay/v1/projects_pb.ts";
import {
  FailureQueueService,
  type RequestFilter,
  RequestLogService,
} from "../gen/relay/v1/requests_pb.ts";
import { EndpointService, type EndpointSpec, LineService } from "../gen/relay/v1/routing_pb.ts";
import { UsageService } from "../gen/relay/v1/usage_pb.ts";
import * as bodies from "./api/bodies.ts";
import type { Ctx } from "./api/context.ts";
import type { PoolUsage, Usage } from "./api/credits.ts";
import * as credits from "./api/credits.ts";
import * as deliveries from "./api/deliveries.ts";
import * as edge from "./api/edge.ts";
import * as failures from "./api/failures.ts";
import type { KeyView } from "./api/keys.ts";
import * as keys from "./api/keys.ts";
import type { MemberView, ProjectView } from "./api/projects.ts";
import * as projects from "./api/projects.ts";
import type { RequestView } from "./api/requests.ts";
import * as requests from "./api/requests.ts";
import * as routing from "./api/routing.ts";
import * as signing from "./api/signing.ts";
import type { ControlApp } from "./app.ts";
import { authenticate, type Caller } from "./auth.ts";
import { postgresAnswers } from "./db/client.ts";
import { toConnectError } from "./errors.ts";
import { healthService } from "./health.ts";
import { observeCall } from "./observability.ts";
import { reflectionService } from "./reflection.ts";

/** The Relay services this plane serves; reflection lists them. */
export const relayServices = [
  ProjectService,
  MemberService,
  PolicyService,
  LineService,
  EndpointService,
  KeyService,
  RequestLogService,
  FailureQueueService,
  UsageService,
  EdgeService,
];

const callerKey = createContextKey<Caller>({ kind: "anonymous" });

/** Authenticates every call and turns whatever a method throws into a ConnectError. */
export function relayInterceptor({ deps, credentials }: ControlApp): Interceptor {
  return (next) => async (req) => {
    const started = performance.now();
    let status = "OK";
    try {
      req.contextValues.set(
        callerKey,
        await authenticate(deps.sql, credentials, req.header.get("authorization")),
      );
      return await next(req);
    } catch (cause) {
      const error = toConnectError(cause);
      status = Code[error.code];
      throw error;
    } finally {
      const seconds = (performance.now() - started) / 1000;
      observeCall("rpc", `${req.service.typeName}/${req.method.name}`, status, seconds);
    }
  };
}

/** Proto enums list the same values as the domain's, in the same order, after UNSPECIFIED. */
function fromEnum<T extends string>(values: readonly T[], value: number): T | undefined {
  return values[value - 1];
}
function toEnum<T extends string>(values: readonly T[], value: T): number {
  return values.indexOf(value) + 1;
}
const ts = (date: Date) => timestampFromDate(date);
const optionalTs = (date: Date | null) => (date ? timestampFromDate(date) : undefined);

const projectOut = (p: ProjectView) => ({
  ...p,
  plan: toEnum(plans, p.plan),
  createdAt: ts(p.createdAt),
});
const memberOut = (m: MemberView) => ({
  ...m,
  role: toEnum(roles, m.role),
  createdAt: ts(m.createdAt),
});
const keyOut = (k: KeyView) => ({
  ...k,
  mode: toEnum(keyModes, k.mode),
  status: toEnum(["active", "expired_grace", "expired", "revoked"], k.status),
  expiresAt: optionalTs(k.expiresAt),
  createdAt: ts(k.createdAt),
  predecessorId: k.predecessorId ?? undefined,
  successorId: k.successorId ?? undefined,
});
const edgeKeyOut = (k: KeyRecord) => ({
  ...k,
  mode: toEnum(keyModes, k.mode),
  expiresAt: optionalTs(k.expiresAt),
  revokedAt: optionalTs(k.revokedAt),
});
const endpointOut = (e: Endpoint) => ({
  ...e,
  targets: e.targets.map((t) => ({ ...t, deliveryMode: toEnum(deliveryModes, t.deliveryMode) })),
  schema: e.schema ?? undefined,
  rateLimit: e.rateLimit ?? undefined,
  updatedAt: ts(e.updatedAt),
});
const endpointIn = (spec: EndpointSpec | undefined) => ({
  path: spec?.path,
  targets: spec?.targets.map((t) => ({
    name: t.name,
    targetUrl: t.targetUrl,
    deliveryMode: fromEnum(deliveryModes, t.deliveryMode),
    timeoutSeconds: t.timeoutSeconds,
    headers: t.headers,
  })),
  ipAllowlist: spec?.ipAllowlist,
  schema: spec?.schema ?? null,
  rateLimit: spec?.rateLimit ?? null,
});
const poolOut = (pool: PoolUsage) => ({
  used: BigInt(pool.used),
  remaining: pool.remaining === null ? undefined : BigInt(pool.remaining),
});
const usageOut = (u: Usage) => ({
  plan: u.plan,
  live: poolOut(u.pools.live),
  test: poolOut(u.pools.test),
});
const requestOut = (r: RequestView) => ({
  ...r,
  status: toEnum(requestStatuses, r.status),
  receivedAt: ts(r.receivedAt),
  updatedAt: ts(r.updatedAt),
  bodyBytes: BigInt(r.bodyBytes),
  attempts: r.attempts.map((a) => ({
    ...a,
    startedAt: ts(a.startedAt),
    statusCode: a.statusCode ?? undefined,
    latencyMs: a.latencyMs ?? undefined,
    error: a.error ?? undefined,
  })),
});

const filterIn = (filter: RequestFilter | undefined) => ({
  status: filter?.status ? fromEnum(requestStatuses, filter.status) : undefined,
  endpoint: filter?.endpoint,
});
const pageQuery = (req: { filter?: RequestFilter; cursor: string; limit: number }) => ({
  ...filterIn(req.filter),
  cursor: req.cursor || undefined,
  limit: req.limit || undefined,
});
const pageOut = (page: { requests: RequestView[]; nextCursor: string }) => ({
  requests: page.requests.map(requestOut),
  nextCursor: page.nextCursor,
});

/**
 * The largest request message each service reads, checked before a body is decompressed past
 * it (connect-node inflates with zlib's `maxOutputLength`), so a small compressed body cannot
 * grow into a large one before the call is authenticated.
 */
export interface MessageLimits {
  managementBytes: number;
  /** StoreBody carries an inbound body: the edge's RELAY_MAX_BODY_BYTES, plus its envelope. */
  edgeBytes: number;
}

/** Room for StoreBody's other fields beside the body. */
const ENVELOPE_BYTES = 64 * 1024;

export function relayRoutes({ deps, notifier, clock }: ControlApp, limits: MessageLimits) {
  const ctxOf = (handler: HandlerContext): Ctx => ({
    ...deps,
    caller: handler.values.get(callerKey),
  });
  return (router: ConnectRouter) => {
    router.service(ProjectService, {
      async createProject(req, h) {
        const plan = fromEnum(plans, req.plan);
        const created = await projects.createProject(ctxOf(h), {
          slug: req.slug,
          name: req.name,
          ...(plan && { plan }),
          ...(req.ownerName && { ownerName: req.ownerName }),
        });
        return {
          project: projectOut(created.project),
          owner: memberOut(created.owner),
          ownerToken: created.ownerToken,
        };
      },
      async getProject(req, h) {
        const { inboundUrl, workflowsUrl, deliveryWarning, ...project } = await projects.getProject(
          ctxOf(h),
          req.project,
        );
        return { project: projectOut(project), inboundUrl, workflowsUrl, deliveryWarning };
      },
      async listProjects(_req, h) {
        const memberships = await projects.listProjects(ctxOf(h));
        return {
          projects: memberships.map((m) => ({
            project: projectOut(m.project),
            role: toEnum(roles, m.role),
            memberName: m.memberName,
          })),
        };
      },
    });
    router.service(MemberService, {
      async addMember(req, h) {
        const added = await projects.addMember(ctxOf(h), req.project, {
          name: req.name,
          role: fromEnum(roles, req.role),
        });
        return { member: memberOut(added.member), token: added.token };
      },
      async listMembers(req, h) {
        return { members: (await projects.listMembers(ctxOf(h), req.project)).map(memberOut) };
      },
      async removeMember(req, h) {
        await projects.removeMember(ctxOf(h), req.project, req.memberId);
        return {};
      },
    });
    router.service(PolicyService, {
      async getPolicy(req, h) {
        const policy = await projects.getPolicy(ctxOf(h), req.project);
        return { policy: nullsToUndefined(policy) };
      },
      async updatePolicy(req, h) {
        const policy = await projects.updatePolicy(ctxOf(h), req.project, {
          defaultKeyTtlDays: req.policy?.defaultKeyTtlDays ?? null,
          maxKeyTtlDays: req.policy?.maxKeyTtlDays ?? null,
          editorsMayCreateNonExpiringKeys: req.policy?.editorsMayCreateNonExpiringKeys ?? false,
        });
        return { policy: nullsToUndefined(policy) };
      },
    });
    router.service(LineService, {
      async listLines(req, h) {
        const lines = await routing.listLines(ctxOf(h), req.project);
        return { lines: lines.map((l) => ({ ...l, createdAt: ts(l.createdAt) })) };
      },
      async createLine(req, h) {
        const line = await routing.createLine(ctxOf(h), req.project, { key: req.key });
        return { line: { ...line, createdAt: ts(line.createdAt) } };
      },
      async deleteLine(req, h) {
        await routing.deleteLine(ctxOf(h), req.project, req.key);
        return {};
      },
    });
    router.service(EndpointService, {
      async listEndpoints(req, h) {
        const endpoints = await routing.listEndpoints(ctxOf(h), req.project, req.line);
        return { endpoints: endpoints.map(endpointOut) };
      },
      async getEndpoint(req, h) {
        const endpoint = await routing.getEndpoint(ctxOf(h), req.project, req.line, req.path);
        return { endpoint: endpointOut(endpoint) };
      },
      async createEndpoint(req, h) {
        const input = endpointIn(req.endpoint);
        const { signingSecret, ...endpoint } = await routing.createEndpoint(
          ctxOf(h),
          req.project,
          req.line,
          input,
        );
        return { endpoint: endpointOut(endpoint), signingSecret };
      },
      async updateEndpoint(req, h) {
        const input = endpointIn(req.endpoint);
        const endpoint = await routing.updateEndpoint(
          ctxOf(h),
          req.project,
          req.line,
          req.path,
          input,
        );
        return { endpoint: endpointOut(endpoint) };
      },
      async deleteEndpoint(req, h) {
        await routing.deleteEndpoint(ctxOf(h), req.project, req.line, req.path);
        return {};
      },
      async rotateSigningSecret(req, h) {
        const rotated = await signing.rotateSigningSecret(
          ctxOf(h),
          req.project,
          req.line,
          req.path,
          {
            ...(req.overlapSeconds !== undefined && { overlapSeconds: req.overlapSeconds }),
          },
        );
        return {
          signingSecret: rotated.signingSecret,
          previousExpiresAt: optionalTs(rotated.previousExpiresAt),
        };
      },
    });
    router.service(KeyService, {
      async listKeys(req, h) {
        return { keys: (await keys.listKeys(ctxOf(h), req.project)).map(keyOut) };
      },
      async mintKey(req, h) {
        const issued = await keys.mintKey(ctxOf(h), req.project, {
          name: req.name,
          mode: fromEnum(keyModes, req.mode),
          ttlDays: req.ttlDays,
        });
        return { key: keyOut(issued.key), plaintext: issued.plaintext };
      },
      async rotateKey(req, h) {
        const issued = await keys.rotateKey(ctxOf(h), req.project, req.keyId);
        return { key: keyOut(issued.key), plaintext: issued.plaintext };
      },
      async revokeKey(req, h) {
        return { key: keyOut(await keys.revokeKey(ctxOf(h), req.project, req.keyId)) };
      },
      async revealSuccessor(req, h) {
        const issued = await keys.revealSuccessor(ctxOf(h), req.project, req.keyId);
        return { key: keyOut(issued.key), plaintext: issued.plaintext };
      },
    });
    router.service(UsageService, {
      async getUsage(req, h) {
        return usageOut(await credits.getUsage(ctxOf(h), req.project));
      },
      async addCredits(req, h) {
        const usage = await credits.addCredits(ctxOf(h), req.project, {
          pool: fromEnum(keyModes, req.pool),
          amount: Number(req.amount),
        });
        return { usage: usageOut(usage) };
      },
      async getDeliveryHistory(req, h) {
        const hours = await deliveries.deliveryHistory(ctxOf(h), req.project, {
          hours: req.hours,
        });
        return { hours: hours.map((entry) => ({ ...entry, hour: ts(entry.hour) })) };
      },
    });
    router.service(FailureQueueService, {
      async listFailures(req, h) {
        return pageOut(await failures.listFailures(ctxOf(h), req.project, pageQuery(req)));
      },
      async replayRequest(req, h) {
        return {
          request: requestOut(await failures.replayRequest(ctxOf(h), req.project, req.requestId)),
        };
      },
      async replayFailures(req, h) {
        return failures.replayFailures(ctxOf(h), req.project, filterIn(req.filter));
      },
    });
    router.service(RequestLogService, {
      async listRequests(req, h) {
        return pageOut(await requests.listRequests(ctxOf(h), req.project, pageQuery(req)));
      },
      async getRequest(req, h) {
        return {
          request: requestOut(await requests.getRequest(ctxOf(h), req.project, req.requestId)),
        };
      },
    });
    router.service(
      EdgeService,
      {
        async resolveKey(req, h) {
          const key = await edge.resolveKey(ctxOf(h), req.project, req.keyHash);
          return { key: key ? edgeKeyOut(key) : undefined };
        },
        async *watchChanges(req, h) {
          for await (const batch of edge.changes(ctxOf(h), notifier, req.afterSequence, h.signal)) {
            yield {
              headSequence: batch.headSequence,
              clockOffsetMs: BigInt(clock.offsetMs()),
              changes: batch.changes.map((change) => ({
                sequence: change.sequence,
                project: change.project,
                change:
                  change.kind === "key"
                    ? { case: "keyChanged" as const, value: edgeKeyOut(change.key) }
                    : { case: "routingChanged" as const, value: {} },
              })),
            };
          }
        },
        async storeBody(req, h) {
          return {
            bodyRef: await bodies.storeBody(ctxOf(h), req.project, req.requestId, req.body),
          };
        },
        async ackChanges(req, h) {
          await edge.ack(ctxOf(h), req.edgeId, req.sequence, req.leaseMs);
          return {};
        },
        async getProjectState(req, h) {
          const state = await edge.projectState(ctxOf(h), req.project);
          if (!state) return {};
          return {
            state: {
              project: projectOut(state.project),
              endpoints: state.endpoints.map(endpointOut),
              signingSecrets: state.signingSecrets.map((e) => ({
                ...e,
                secrets: e.secrets.map((s) => ({ key: s.key, expiresAt: optionalTs(s.expiresAt) })),
              })),
              defaultRateLimit: state.defaultRateLimit,
              liveCreditsExhausted: state.exhaustedPools.includes("live"),
              testCreditsExhausted: state.exhaustedPools.includes("test"),
            },
          };
        },
      },
      { readMaxBytes: limits.edgeBytes + ENVELOPE_BYTES },
    );
    router.service(
      Health,
      healthService(relayServices, () => postgresAnswers(deps.sql)),
    );
    router.service(ServerReflection, reflectionService([...relayServices, Health]));
  };
}

function nullsToUndefined<T extends object>(value: T) {
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k, v === null ? undefined : v]),
  ) as { [K in keyof T]: Exclude<T[K], null> | undefined };
}
