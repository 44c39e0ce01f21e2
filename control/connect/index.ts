/**
 * The Connect/gRPC/gRPC-Web face of the management API. Each method converts the protobuf
 * message to the same plain input the REST API parses (`convert.ts`), calls the one shared
 * operation, and converts the answer back; validation and rules live in the operations only.
 * One file per service; this one composes them with health and reflection.
 */
import type { ConnectRouter } from "@connectrpc/connect";
import { Health } from "../../gen/grpc/health/v1/health_pb.ts";
import { ServerReflection } from "../../gen/grpc/reflection/v1/reflection_pb.ts";
import { DeliveryControlService } from "../../gen/relay/v1/circuits_pb.ts";
import { EdgeService } from "../../gen/relay/v1/edge_pb.ts";
import { KeyService } from "../../gen/relay/v1/keys_pb.ts";
import { NotificationService } from "../../gen/relay/v1/notifications_pb.ts";
import { MemberService, PolicyService, ProjectService } from "../../gen/relay/v1/projects_pb.ts";
import { FailureQueueService, RecoveryService } from "../../gen/relay/v1/recoveries_pb.ts";
import { RequestLogService } from "../../gen/relay/v1/requests_pb.ts";
import { EndpointService, LineService } from "../../gen/relay/v1/routing_pb.ts";
import { ScheduleService } from "../../gen/relay/v1/schedules_pb.ts";
import { TransformService } from "../../gen/relay/v1/transforms_pb.ts";
import { UsageService } from "../../gen/relay/v1/usage_pb.ts";
import { postgresAnswers } from "../../store/db.ts";
import type { ControlApp } from "../app.ts";
import { healthService } from "../health.ts";
import { reflectionService } from "../reflection.ts";
import { contextOf } from "./caller.ts";
import { deliveryControlService } from "./delivery-control.ts";
import { edgeService } from "./edge.ts";
import { endpointService } from "./endpoint.ts";
import { failureQueueService } from "./failure-queue.ts";
import { keyService } from "./key.ts";
import { lineService } from "./line.ts";
import { memberService } from "./member.ts";
import { notificationService } from "./notifications.ts";
import { policyService } from "./policy.ts";
import { projectService } from "./project.ts";
import { recoveryService } from "./recoveries.ts";
import { requestLogService } from "./request-log.ts";
import { scheduleService } from "./schedules.ts";
import { transformService } from "./transforms.ts";
import { usageService } from "./usage.ts";

export { relayInterceptor } from "./caller.ts";

/** The Relay services this plane serves; reflection lists them. */
export const relayServices = [
  ProjectService,
  MemberService,
  PolicyService,
  LineService,
  EndpointService,
  TransformService,
  DeliveryControlService,
  KeyService,
  RequestLogService,
  FailureQueueService,
  RecoveryService,
  ScheduleService,
  UsageService,
  NotificationService,
  EdgeService,
];

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

export function relayRoutes(app: ControlApp, limits: MessageLimits) {
  const ctxOf = contextOf(app.deps);
  return (router: ConnectRouter) => {
    projectService(router, ctxOf);
    memberService(router, ctxOf);
    policyService(router, ctxOf);
    lineService(router, ctxOf);
    endpointService(router, ctxOf);
    transformService(router, ctxOf);
    deliveryControlService(router, ctxOf);
    keyService(router, ctxOf);
    usageService(router, ctxOf);
    notificationService(router, ctxOf);
    failureQueueService(router, ctxOf);
    recoveryService(router, ctxOf);
    scheduleService(router, ctxOf);
    requestLogService(router, ctxOf);
    edgeService(router, ctxOf, app, limits.edgeBytes);
    router.service(
      Health,
      healthService(relayServices, () => postgresAnswers(app.deps.sql)),
    );
    router.service(ServerReflection, reflectionService([...relayServices, Health]));
  };
}
