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

/** The current path and query, re-rendering on every navigation. */
export function useLocation(): { pathname: string; search: URLSearchParams } {
  const href = useSyncExternalStore(
    subscribe,
    () => window.location.pathname + window.location.search,
  );
  const url = new URL(href, window.location.origin);
  return { pathname: url.pathname, search: url.searchParams };
}

export function navigate(to: string, { replace = false } = {}): void {
  if (replace) window.history.replaceState(null, "", to);
  else window.history.pushState(null, "", to);
  window.dispatchEvent(new Event(changed));
  // A new page starts at its top, as a full load would.
  window.scrollTo(0, 0);
}

/** `/panel/:project/requests/:requestId` against a path: the named parts, or null. */
export function matchPath(pattern: string, pathname: string): Record<string, string> | null {
  const names: string[] = [];
  const source = pattern.replace(/:(\w+)/g, (_, name: string) => {
    names.push(name);
    return "([^/]+)";
  });
  const match = new RegExp(`^${source}/?$`).exec(pathname);
  if (!match) return null;
  return Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(match[i + 1] ?? "")]));
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
