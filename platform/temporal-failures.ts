/**
 * Failures' messages and stack traces travel in an encoded payload, so the payload codec seals
 * them as well (Temporal otherwise keeps them in clear beside the sealed details). The worker
 * loads this module by path, into the workflow sandbox as well: it imports nothing else.
 */
import { DefaultFailureConverter } from "@temporalio/common";

export const failureConverter = new DefaultFailureConverter({ encodeCommonAttributes: true });
