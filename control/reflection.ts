/**
 * gRPC server reflection (grpc.reflection.v1) as a Connect service, so `grpcurl` and
 * `buf curl --reflect` work without the proto files. connect-es ships none (its issue #507).
 */
import { create, type DescFile, type DescService, toBinary } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ErrorResponseSchema,
  FileDescriptorResponseSchema,
  ListServiceResponseSchema,
  ServerReflection,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from "../gen/grpc/reflection/v1/reflection_pb.ts";

/** gRPC status NOT_FOUND, as the reflection protocol reports lookups that fail. */
const NOT_FOUND = 5;

export function reflectionService(services: DescService[]): ServiceImpl<typeof ServerReflection> {
  const all = [...services, ServerReflection];
  const filesByName = new Map<string, DescFile>();
  const fileBySymbol = new Map<string, DescFile>();
  const addFile = (file: DescFile) => {
    if (filesByName.has(`${file.name}.proto`)) return;
    filesByName.set(`${file.name}.proto`, file);
    for (const type of [...file.messages, ...file.enums, ...file.services]) {
      fileBySymbol.set(type.typeName, file);
    }
    for (const service of file.services) {
      for (const method of service.methods)
        fileBySymbol.set(`${service.typeName}.${method.name}`, file);
    }
    for (const nested of file.messages.flatMap((m) => [...m.nestedMessages, ...m.nestedEnums])) {
      fileBySymbol.set(nested.typeName, file);
    }
    file.dependencies.forEach(addFile);
  };
  for (const service of all) addFile(service.file);

  /** The file and every file it imports, transitively, as serialized descriptors. */
  const withDependencies = (file: DescFile): Uint8Array[] => {
    const seen = new Set<DescFile>();
    const visit = (f: DescFile) => {
      if (seen.has(f)) return;
      seen.add(f);
      f.dependencies.forEach(visit);
    };
    visit(file);
    // The requested file first, as grpcurl expects.
    return [file, ...[...seen].filter((f) => f !== file)].map((f) =>
      toBinary(FileDescriptorProtoSchema, f.proto),
    );
  };

  const notFound = (what: string): ServerReflectionResponse["messageResponse"] => ({
    case: "errorResponse",
    value: create(ErrorResponseSchema, { errorCode: NOT_FOUND, errorMessage: `${what} not found` }),
  });
  const files = (file: DescFile | undefined, what: string) =>
    file
      ? ({
          case: "fileDescriptorResponse",
          value: create(FileDescriptorResponseSchema, {
            fileDescriptorProto: withDependencies(file),
          }),
        } as const)
      : notFound(what);

  const answer = (
    request: ServerReflectionRequest,
  ): ServerReflectionResponse["messageResponse"] => {
    const query = request.messageRequest;
    switch (query.case) {
      case "listServices":
        return {
          case: "listServicesResponse",
          value: create(ListServiceResponseSchema, {
            service: all.map((s) => ({ name: s.typeName })),
          }),
        };
      case "fileByFilename":
        return files(filesByName.get(query.value), `file ${query.value}`);
      case "fileContainingSymbol":
        return files(fileBySymbol.get(query.value), `symbol ${query.value}`);
      default:
        return notFound("extension");
    }
  };

  return {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        yield {
          validHost: request.host,
          originalRequest: request,
          messageResponse: answer(request),
        };
      }
    },
  };
}
