import {
  create,
  type DescMessage,
  fromBinary,
  type MessageShape,
  toBinary,
} from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import * as grpc from "@grpc/grpc-js";
import { afterAll, expect, test } from "vitest";
import {
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus,
  HealthCheckResponseSchema,
} from "../gen/grpc/health/v1/health_pb.ts";
import {
  ServerReflectionRequestSchema,
  ServerReflectionResponseSchema,
} from "../gen/grpc/reflection/v1/reflection_pb.ts";
import {
  GetProjectRequestSchema,
  GetProjectResponseSchema,
  Plan,
  ProjectService,
} from "../gen/relay/v1/projects_pb.ts";
import { memberClient, newProject, stack } from "./helpers.ts";

const client = new grpc.Client(new URL(stack().controlUrl).host, grpc.credentials.createInsecure());
afterAll(() => client.close());

const serialize =
  <T extends DescMessage>(schema: T) =>
  (message: MessageShape<T>) =>
    Buffer.from(toBinary(schema, message));
const deserialize =
  <T extends DescMessage>(schema: T) =>
  (bytes: Buffer) =>
    fromBinary(schema, bytes);

test("a plain gRPC client (grpc-js over h2c) calls ProjectService.GetProject", async () => {
  const project = await newProject("paid");
  const metadata = new grpc.Metadata();
  metadata.set("authorization", `Bearer ${project.ownerToken}`);

  const response = await new Promise<MessageShape<typeof GetProjectResponseSchema>>(
    (resolve, reject) =>
      client.makeUnaryRequest(
        "/relay.v1.ProjectService/GetProject",
        serialize(GetProjectRequestSchema),
        deserialize(GetProjectResponseSchema),
        create(GetProjectRequestSchema, { project: project.slug }),
        metadata,
        (error, value) => (error || !value ? reject(error) : resolve(value)),
      ),
  );

  expect(response.project?.slug).toBe(project.slug);
  expect(response.project?.plan).toBe(Plan.PAID);
});

test("gRPC errors carry the matching status code", async () => {
  const error = await new Promise<grpc.ServiceError>((resolve) =>
    client.makeUnaryRequest(
      "/relay.v1.ProjectService/GetProject",
      serialize(GetProjectRequestSchema),
      deserialize(GetProjectResponseSchema),
      create(GetProjectRequestSchema, { project: "no-such-project" }),
      new grpc.Metadata(),
      (e) => resolve(e as grpc.ServiceError),
    ),
  );
  expect(error.code).toBe(grpc.status.UNAUTHENTICATED);
});

test("grpc.health.v1 answers SERVING for the server and its services, NOT_FOUND for others", async () => {
  const check = (service: string) =>
    new Promise<{ status?: number; code?: number }>((resolve) =>
      client.makeUnaryRequest(
        "/grpc.health.v1.Health/Check",
        serialize(HealthCheckRequestSchema),
        deserialize(HealthCheckResponseSchema),
        create(HealthCheckRequestSchema, { service }),
        new grpc.Metadata(),
        (error, value) => resolve(error ? { code: error.code } : { status: value?.status }),
      ),
    );
  const serving = { status: HealthCheckResponse_ServingStatus.SERVING };
  expect(await check("")).toEqual(serving);
  expect(await check("relay.v1.KeyService")).toEqual(serving);
  expect(await check("no.such.Service")).toEqual({ code: grpc.status.NOT_FOUND });
});

test("server reflection lists every service and serves their descriptors", async () => {
  const call = client.makeBidiStreamRequest(
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    serialize(ServerReflectionRequestSchema),
    deserialize(ServerReflectionResponseSchema),
  );
  const answers: MessageShape<typeof ServerReflectionResponseSchema>[] = [];
  const done = new Promise<void>((resolve, reject) => {
    call.on("data", (answer) => answers.push(answer));
    call.on("end", resolve);
    call.on("error", reject);
  });
  call.write(
    create(ServerReflectionRequestSchema, { messageRequest: { case: "listServices", value: "" } }),
  );
  call.write(
    create(ServerReflectionRequestSchema, {
      messageRequest: { case: "fileContainingSymbol", value: "relay.v1.KeyService.MintKey" },
    }),
  );
  call.end();
  await done;

  const [list, file] = answers.map((a) => a.messageResponse);
  expect(list?.case).toBe("listServicesResponse");
  const names = list?.case === "listServicesResponse" ? list.value.service.map((s) => s.name) : [];
  expect(names).toEqual(
    expect.arrayContaining([
      "relay.v1.ProjectService",
      "relay.v1.MemberService",
      "relay.v1.PolicyService",
      "relay.v1.LineService",
      "relay.v1.EndpointService",
      "relay.v1.KeyService",
      "relay.v1.RequestLogService",
      "relay.v1.EdgeService",
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
    ]),
  );
  expect(file?.case).toBe("fileDescriptorResponse");
  const descriptors =
    file?.case === "fileDescriptorResponse"
      ? file.value.fileDescriptorProto.map(
          (bytes) => fromBinary(FileDescriptorProtoSchema, bytes).name,
        )
      : [];
  expect(descriptors[0]).toBe("relay/v1/keys.proto");
  expect(descriptors).toContain("google/protobuf/timestamp.proto");
});

test.each([
  ["gRPC-Web", createGrpcWebTransport],
  ["Connect", createConnectTransport],
])("the same port answers %s (connect-web, as a browser would call it)", async (_, transport) => {
  const project = await newProject("free");
  const client = memberClient(ProjectService, project.ownerToken, transport);
  const { project: found } = await client.getProject({ project: project.slug });
  expect(found?.slug).toBe(project.slug);
  expect(found?.plan).toBe(Plan.FREE);
});
