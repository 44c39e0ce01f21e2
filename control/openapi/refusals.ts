/**
 * How the document refers to its components, and its refusals: a response component per set of
 * error codes a status answers, made once and referred to by every operation that may refuse so.
 */
import { STATUS_CODES } from "node:http";
import { type ErrorCode, errorStatus } from "../../core/errors.ts";
import { NO_CONTROL_CHARACTERS } from "../api/validation.ts";

export const SCHEMAS = "#/components/schemas/";
export const ref = (id: string) => ({ $ref: `${SCHEMAS}${id}` });
export const json = (schema: object) => ({ "application/json": { schema } });

/** A path parameter's schema: a segment with no control character (400 before any lookup). */
export const segment = { type: "string", minLength: 1, pattern: NO_CONTROL_CHARACTERS };

/** Every error code, in core/errors.ts's order (which is by status). */
const errorOrder = Object.keys(errorStatus) as ErrorCode[];

/**
 * The document's refusals, each a response component: one per set of codes a status answers,
 * its body the Error schema with `code` narrowed to them.
 */
export class Refusals {
  readonly components: Record<string, object> = {};

  /** A response per status for `codes`, by reference. */
  responses(codes: ErrorCode[]) {
    const byStatus = new Map<number, ErrorCode[]>();
    for (const code of errorOrder.filter((c) => codes.includes(c))) {
      byStatus.set(errorStatus[code], [...(byStatus.get(errorStatus[code]) ?? []), code]);
    }
    return Object.fromEntries(
      [...byStatus].map(([status, refused]) => [String(status), this.named(status, refused)]),
    );
  }

  private named(status: number, codes: ErrorCode[]) {
    const name = codes
      .map((code) => code.replace(/(?:^|_)(.)/g, (_, c) => c.toUpperCase()))
      .join("Or");
    this.components[name] ??= {
      description: `${STATUS_CODES[status]}: ${codes.map((c) => `\`${c}\``).join(", ")}`,
      content: json({
        allOf: [ref("Error")],
        type: "object",
        properties: { error: { type: "object", properties: { code: { enum: codes } } } },
      }),
    };
    return { $ref: `#/components/responses/${name}` };
  }
}
