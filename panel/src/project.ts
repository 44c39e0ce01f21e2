/** The project a page belongs to, and the member's token and role in it. */
import type { DescService } from "@bufbuild/protobuf";
import { createConnectQueryKey } from "@connectrpc/connect-query";
import { useQueryClient } from "@tanstack/react-query";
import { createContext, useContext } from "react";
import type { Membership } from "./session.ts";

export const ProjectContext = createContext<Membership | null>(null);

export function useProject(): Membership {
  const membership = useContext(ProjectContext);
  if (!membership) throw new Error("useProject outside a project's pages");
  return membership;
}

/** Marks every cached answer of these services stale, so what a change touched loads again. */
export function useInvalidate(...services: DescService[]) {
  const client = useQueryClient();
  return () =>
    Promise.all(
      services.map((schema) =>
        client.invalidateQueries({
          queryKey: createConnectQueryKey({ schema, cardinality: undefined }),
        }),
      ),
    );
}

/** The panel's address of a project page. */
export const projectPath = (project: string, ...rest: string[]) =>
  ["/panel", project, ...rest]
    .map((part, i) => (i < 2 ? part : encodeURIComponent(part)))
    .join("/");
