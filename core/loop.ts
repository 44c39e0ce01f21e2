/**
 * Loops through Relay's own edge, found with RFC 8586's `CDN-Loop` header. Every delivery carries
 * the caller's `CDN-Loop` with this Relay's mark appended, so a request that comes back (a target
 * that resolves to the edge, a customer's proxy that posts a delivery back with its headers)
 * names this Relay once more each time, and the edge refuses it once it has passed too often.
 */

export const CDN_LOOP = "cdn-loop";

/**
 * Passes through this Relay a request may already have made: a request naming it more often is
 * refused (508 `loop_detected`). A few, not one, so that a project may relay to another project
 * of the same Relay through a proxy of its own; a loop then makes at most this many deliveries
 * more per target (two targets that loop: 2 + 4 + 8).
 */
export const MAX_LOOP_PASSES = 3;

/** The longest `CDN-Loop` the edge reads; a longer one is refused (400) rather than parsed. */
export const MAX_CDN_LOOP_LENGTH = 4096;

/**
 * This Relay's mark: its inbound domain (`host[:port]`, RFC 8586's `received-by`), the same on
 * every edge of a deployment, since each serves only that domain.
 */
export function loopMark(edgeDomain: string): string {
  return edgeDomain.trim().toLowerCase();
}

/**
 * How many times `cdnLoop` names `mark`. The header is a comma list of `pseudonym *(; param)`;
 * each member's pseudonym (before any `;`) is compared, case-insensitively. Quoted parameter
 * values are not honoured: an unclosed quote would otherwise hide the marks appended after it,
 * and a comma inside one can only add a count, never remove one.
 */
export function passesThrough(cdnLoop: string, mark: string): number {
  let passes = 0;
  for (const member of cdnLoop.split(",")) {
    const pseudonym = member.split(";", 1)[0]?.trim().toLowerCase();
    if (pseudonym === mark) passes++;
  }
  return passes;
}

/** The `CDN-Loop` a delivery carries: the caller's, kept as it came, then this Relay's mark. */
export function markedCdnLoop(cdnLoop: string | null, mark: string): string {
  return cdnLoop?.trim() ? `${cdnLoop.trim()}, ${mark}` : mark;
}
