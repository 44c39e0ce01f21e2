/**
 * Who is signed in: member tokens and the project each belongs to. A token is asked which
 * projects it manages (ProjectService.ListProjects) when it is added; more tokens add more
 * projects. Tokens live in sessionStorage (this tab) or, when the member asks to be remembered,
 * localStorage (this browser), and never leave the browser except to the control plane. The
 * admin token is refused and never kept: the panel is for members, operators have the API.
 */
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { useSyncExternalStore } from "react";
import { ProjectService } from "../../gen/relay/v1/projects_pb.ts";
import { type RoleName, roleName } from "./model.ts";
import { transportFor } from "./transport.ts";

export interface Membership {
  token: string;
  project: string;
  projectName: string;
  role: RoleName;
  memberName: string;
  /** Absent in sessions kept before member ids were. */
  memberId?: string;
}

const storageKey = "relay.panel.memberships";
const changed = "relay:session";

function read(storage: Storage): Membership[] {
  try {
    const parsed: unknown = JSON.parse(storage.getItem(storageKey) ?? "[]");
    return Array.isArray(parsed) ? (parsed as Membership[]) : [];
  } catch {
    return [];
  }
}

let cached: { key: string; memberships: Membership[] } | undefined;

/** Both stores, one entry per project (the newest token wins), in a stable array per content. */
function snapshot(): Membership[] {
  const key = `${localStorage.getItem(storageKey)}|${sessionStorage.getItem(storageKey)}`;
  if (cached?.key !== key) {
    const byProject = new Map<string, Membership>();
    for (const m of [...read(localStorage), ...read(sessionStorage)]) byProject.set(m.project, m);
    cached = { key, memberships: [...byProject.values()] };
  }
  return cached.memberships;
}

function subscribe(onChange: () => void) {
  window.addEventListener("storage", onChange);
  window.addEventListener(changed, onChange);
  return () => {
    window.removeEventListener("storage", onChange);
    window.removeEventListener(changed, onChange);
  };
}

export function useMemberships(): Membership[] {
  return useSyncExternalStore(subscribe, snapshot);
}

function write(update: (list: Membership[]) => Membership[], storage: Storage) {
  storage.setItem(storageKey, JSON.stringify(update(read(storage))));
}

/**
 * Asks the control plane which projects `token` manages and keeps them. Throws the call's
 * ConnectError (an invalid token is Unauthenticated, the admin token PermissionDenied) for the
 * sign-in form to show.
 */
export async function signIn(token: string, remember: boolean): Promise<Membership[]> {
  const client = createClient(ProjectService, transportFor(token));
  const { projects, callerIsAdmin } = await client.listProjects({});
  if (callerIsAdmin) {
    throw new ConnectError(
      "the admin token is for the API; sign in with a member token (operators manage projects over the REST or Connect API)",
      Code.PermissionDenied,
    );
  }
  const added = projects.flatMap(({ project, role, memberName, memberId }) =>
    project
      ? [
          {
            token,
            project: project.slug,
            projectName: project.name,
            role: roleName(role),
            memberName,
            memberId,
          },
        ]
      : [],
  );
  const slugs = new Set(added.map((m) => m.project));
  // A project signed in again with another token forgets the old one, wherever it was kept.
  for (const storage of [localStorage, sessionStorage]) {
    write((list) => list.filter((m) => !slugs.has(m.project)), storage);
  }
  write((list) => [...list, ...added], remember ? localStorage : sessionStorage);
  window.dispatchEvent(new Event(changed));
  return added;
}

/** Forgets a token (every project it signed in). */
export function signOut(token: string): void {
  for (const storage of [localStorage, sessionStorage]) {
    write((list) => list.filter((m) => m.token !== token), storage);
  }
  window.dispatchEvent(new Event(changed));
}

/** After the member rotated its own token: every project it signed in keeps the new one. */
export function replaceToken(oldToken: string, newToken: string): void {
  for (const storage of [localStorage, sessionStorage]) {
    write(
      (list) => list.map((m) => (m.token === oldToken ? { ...m, token: newToken } : m)),
      storage,
    );
  }
  window.dispatchEvent(new Event(changed));
}

/**
 * Forgets an admin token that an older panel kept as if it were a member's. Those entries are
 * the ones without a member name: the control plane names every member (a name is required)
 * and answered the admin token with an empty one, so no request to it is needed to tell them.
 */
export function forgetAdminTokens(): void {
  for (const storage of [localStorage, sessionStorage]) {
    if (read(storage).some((m) => !m.memberName)) {
      write((list) => list.filter((m) => m.memberName), storage);
    }
  }
}
