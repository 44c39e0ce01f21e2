import { RelayError } from "../../core/errors.ts";
import type { Envelope, Step, With } from "../pipeline.ts";

/** Names the project from the Host; whether it exists is the auth step's to say. */
export const project: Step<Envelope, With<"project">> = async function project(envelope, next) {
  const { request } = envelope;
  // The Host first: under Deno a bad one is in the URL too, which would not parse.
  const host = request.headers.get("host") ?? new URL(request.url).host;
  return next(Object.assign(envelope, { project: projectOf(host) }));
};

/**
 * The project is the first label of the Host header: `{project}.{domain}`. A Host that is not a
 * host (a port of 99999, `%00`, a path) or names no project (an IP address) is a bad request;
 * a first label that cannot be a slug is an unknown project, refused by the auth step.
 */
export function projectOf(host: string): string {
  // Made only when thrown: an Error's stack costs more than the rest of the check.
  const bad = () => new RelayError("bad_request", "the Host header is not a valid host");
  const [, name = "", port] = /^([^:]+|\[[^\]]*\])(?::(\d{1,5}))?$/.exec(host) ?? [];
  if (!name || Number(port ?? 0) > 65_535) throw bad();
  let hostname: string;
  try {
    hostname = new URL(`http://${name}`).hostname;
  } catch {
    throw bad();
  }
  // The URL parser rewrites what is not a plain name (escapes, IPv4 shorthands, Unicode).
  if (hostname !== name.toLowerCase()) throw bad();
  if (hostname.startsWith("[") || /^[\d.]+$/.test(hostname)) {
    throw new RelayError("bad_request", "the Host header must name a project: {project}.{domain}");
  }
  return hostname.split(".")[0] ?? "";
}
