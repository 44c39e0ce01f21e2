import { describe, expect, it } from "vitest";
import { deliveryModes, keyModes, plans, requestStatuses, roles } from "../../core/model.ts";
import { KeyMode, KeyStatus } from "../../gen/relay/v1/keys_pb.ts";
import { Plan, Role } from "../../gen/relay/v1/projects_pb.ts";
import { RequestStatus } from "../../gen/relay/v1/requests_pb.ts";
import { DeliveryMode } from "../../gen/relay/v1/routing_pb.ts";
import { Pool } from "../../gen/relay/v1/usage_pb.ts";
import { fromEnum, keyStatuses, toEnum } from "./convert.ts";

/** Each domain list beside the proto enum the converters map it to and from. */
const pairs: [string, readonly string[], Record<string, string | number>][] = [
  ["Plan", plans, Plan],
  ["Role", roles, Role],
  ["KeyMode", keyModes, KeyMode],
  ["Pool", keyModes, Pool],
  ["KeyStatus", keyStatuses, KeyStatus],
  ["DeliveryMode", deliveryModes, DeliveryMode],
  ["RequestStatus", requestStatuses, RequestStatus],
];

describe("enum converters", () => {
  it.each(pairs)(
    "%s: every domain value maps to the proto value of its name and back",
    (_, values, protoEnum) => {
      const numbers = Object.values(protoEnum).filter((v) => typeof v === "number");
      expect(numbers.length).toBe(values.length + 1);
      for (const value of values) {
        const number = toEnum(values, value);
        expect(number).toBe(protoEnum[value.toUpperCase()]);
        expect(fromEnum(values, number)).toBe(value);
      }
      expect(fromEnum(values, 0)).toBeUndefined();
    },
  );
});
