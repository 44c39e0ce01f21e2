import { RelayError } from "../../core/errors.ts";
import type { Envelope, Step, With } from "../pipeline.ts";
import { wrongKey } from "./auth.ts";

/**
 * Names the project from the Host, which must be `{project}.{domain}` under the edge's domain;
 * whether the project exists is the auth step's to say. On a dev stack's domain, `localhost`, a
 * call to the domain alone names its project first in the path instead
 * (`localhost:8787/{project}/{line}/{endpoint}`): Node, Python and Go ask the system's resolver,
 * which need not know `*.localhost` names, and Node's fetch sends no Host of the caller's own.
 */
export function project(edgeDomain: string): Step<Envelope, With<"project">> {
  const domain = hostOf(edgeDomain);
  return async function project(envelope, next) {
    const { request } = envelope;
    // The Host first: under Deno a bad one is in the URL too, which would not parse.
    const host = request.headers.get("host") ?? new URL(request.url).host;
    if (domain === DEV_DOMAIN && DEV_DOMAIN_ALONE.test(host)) {
      const [, first = "", route = ""] =
        /^\/([^/]*)(.*)$/.exec(new URL(request.url).pathname) ?? [];
      return next(Object.assign(envelope, { project: first.toLowerCase(), route }));
    }
    return next(Object.assign(envelope, { project: projectOf(host, domain) }));
  };
}

/** The domain on which the project may lead the path, and a Host that is that domain alone. */
const DEV_DOMAIN = "localhost";
const DEV_DOMAIN_ALONE = /^localhost\.?(:\d{1,5})?$/i;

/** The domain's host, without its port or a trailing dot. */
function hostOf(edgeDomain: string): string {
  return edgeDomain.toLowerCase().replace(/:\d*$/, "").replace(/\.$/, "");
}

/**
 * The project is the Host's first label: `{project}.{domain}`, on any port (a proxy in front may
 * move it). A Host that is not a host (a port of 99999, `%00`, a path) or names no project (an IP
 * address) is a bad request. Any other host (another domain, a name further under this one, the
 * domain alone) gets the 401 a wrong key gets, so the edge answers for its own domain only: a
 * target that resolves to it by another name reaches no project. A first label that cannot be a
 * slug is an unknown project, refused by the auth step.
 */
export function projectOf(host: string, domain: string): string {
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
  const [label = "", ...rest] = hostname.replace(/\.$/, "").split(".");
  if (rest.join(".") !== domain) throw wrongKey();
  return label;
}
