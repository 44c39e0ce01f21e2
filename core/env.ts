/** Pieces of environment parsing that every process's config module shares. */
import { z } from "zod";

/** An on/off variable: "1" or "true" is on; unset, empty, "0" or "false" is off. */
export const envFlag = z
  .enum(["0", "1", "true", "false", ""])
  .default("")
  .transform((value) => value === "1" || value === "true");
