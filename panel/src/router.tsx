/**
 * The panel's routing: paths under /panel/ in the browser's history, which the control plane
 * answers with the same page (control/panel.ts). Small on purpose: a handful of patterns.
 */
import { type AnchorHTMLAttributes, type MouseEvent, useSyncExternalStore } from "react";

const changed = "relay:navigate";

function subscribe(onChange: () => void) {
  window.addEventListener("popstate", onChange);
  window.addEventListener(changed, onChange);
  return () => {
    window.removeEventListener("popstate", onChange);
    window.removeEventListener(changed, onChange);
  };
}

/**
 * A path's parts, each decoded once, here: a part whose escape is malformed (`%ZZ`) is null,
 * which no route matches, so such an address is simply a page that does not exist.
 */
export type Segments = (string | null)[];

function segmentsOf(pathname: string): Segments {
  return pathname
    .split("/")
    .filter((part) => part !== "")
    .map((part) => {
      try {
        return decodeURIComponent(part);
      } catch {
        return null;
      }
    });
}

/** The current path (as typed, and decoded into segments) and query, on every navigation. */
export function useLocation(): { pathname: string; segments: Segments; search: URLSearchParams } {
  const href = useSyncExternalStore(
    subscribe,
    () => window.location.pathname + window.location.search,
  );
  const url = new URL(href, window.location.origin);
  return { pathname: url.pathname, segments: segmentsOf(url.pathname), search: url.searchParams };
}

export function navigate(to: string, { replace = false } = {}): void {
  if (replace) window.history.replaceState(null, "", to);
  else window.history.pushState(null, "", to);
  window.dispatchEvent(new Event(changed));
  // A new page starts at its top, as a full load would.
  window.scrollTo(0, 0);
}

/** `/requests/:requestId` against a path's segments: the named parts, or null. */
export function matchPath(pattern: string, segments: Segments): Record<string, string> | null {
  const parts = pattern.split("/").filter((part) => part !== "");
  if (parts.length !== segments.length) return null;
  const params: Record<string, string> = {};
  for (const [i, part] of parts.entries()) {
    const segment = segments[i];
    if (segment === null || segment === undefined) return null;
    if (part.startsWith(":")) params[part.slice(1)] = segment;
    else if (part !== segment) return null;
  }
  return params;
}

/** A real link (open in a new tab works) that navigates in place on a plain click. */
export function Link({ to, ...props }: { to: string } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  const onClick = (event: MouseEvent<HTMLAnchorElement>) => {
    props.onClick?.(event);
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(to);
  };
  return <a {...props} href={to} onClick={onClick} />;
}
