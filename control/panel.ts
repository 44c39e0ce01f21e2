/**
 * The browser panel's files (panel/dist, built by dev/panel.ts) at `/`. Only `/`, `/assets/*`,
 * the favicon and the panel's own routes under `/panel/` are answered here; every other path
 * (REST under `/projects` and `/admin`, Connect under `/relay.v1.*`, ops) goes on to the API.
 */
import { readFile } from "node:fs/promises";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";
import type { connectNodeAdapter } from "@connectrpc/connect-node";

const defaultDist = fileURLToPath(new URL("../panel/dist", import.meta.url));

const contentTypes: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
};

/** The panel talks only to its own origin and is never framed. */
const securityHeaders = {
  "content-security-policy":
    "default-src 'self'; img-src 'self' data:; style-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

/** connect-node's request and response types (HTTP/1.1 and HTTP/2 alike). */
type NodeHandler = NonNullable<Parameters<typeof connectNodeAdapter>[0]["fallback"]>;
export type Req = Parameters<NodeHandler>[0];
export type Res = Parameters<NodeHandler>[1];

/** Answers the request when it is the panel's and says so; false leaves it to the API. */
export function panelHandler(dist = defaultDist) {
  return async (req: Req, res: Res): Promise<boolean> => {
    if (req.method !== "GET" && req.method !== "HEAD") return false;
    const path = new URL(req.url ?? "/", "http://control").pathname;
    let file: string;
    if (path === "/" || path === "/panel" || path.startsWith("/panel/")) {
      // The panel routes in the browser; every one of its URLs loads the same page.
      file = "index.html";
    } else if (path.startsWith("/assets/") || path === "/favicon.svg") {
      // Normalized from the root, so no `..` can leave panel/dist; a malformed escape is no file.
      const decoded = safeDecode(path);
      if (decoded === null) return false;
      file = normalize(decoded).replace(/^\/+/, "");
    } else {
      return false;
    }
    const body = await readFile(join(dist, file)).catch(() => null);
    if (!body) {
      const missing = file === "index.html";
      res.writeHead(missing ? 503 : 404, { "content-type": "text/plain; charset=utf-8" });
      res.end(missing ? "The panel is not built: run `npm run build:panel`.\n" : "not found\n");
      return true;
    }
    res.writeHead(200, {
      "content-type": contentTypes[extname(file)] ?? "application/octet-stream",
      "content-length": body.length,
      // Vite names assets by their content hash; the page itself must always be fetched again.
      "cache-control": file.startsWith("assets/")
        ? "public, max-age=31536000, immutable"
        : "no-cache",
      ...securityHeaders,
    });
    // Node leaves the body out of a HEAD answer itself.
    res.end(body);
    return true;
  };
}

function safeDecode(path: string): string | null {
  try {
    return decodeURIComponent(path);
  } catch {
    return null;
  }
}
