import { RelayError } from "../../core/errors.ts";
import type { Received, Step } from "../pipeline.ts";

/** A key's credit pool the control plane reports empty takes no more calls (402). */
export const credits: Step<Received> = async function credits(envelope, next) {
  const { mode } = envelope.key;
  if (envelope.projectState.exhaustedPools.includes(mode)) {
    throw new RelayError("insufficient_credits", `the ${mode} credit pool is empty`);
  }
  return next(envelope);
};
