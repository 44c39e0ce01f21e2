/**
 * A time in the management API: a Date in the code and an ISO 8601 string in JSON, as a codec
 * whose input side is what goes on the wire, so answers are documented on their input side.
 */
import { z } from "zod";

export const timestamp = z.codec(z.iso.datetime(), z.date(), {
  decode: (text) => new Date(text),
  encode: (date) => date.toISOString(),
});
