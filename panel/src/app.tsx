/** The panel's frame: providers, the signed-in projects, the navigation and the routes. */
import { TransportProvider, useQuery } from "@connectrpc/connect-query";
import { QueryClient, QueryClientProvider } from "@tanstack/react-query";
import { type ReactNode, useEffect, useRef } from "react";
import { ProjectService } from "../../gen/relay/v1/projects_pb.ts";
import { retryable } from "./errors.ts";
import { EndpointPage, NewEndpointPage } from "./pages/endpoint.tsx";
import { EndpointsPage } from "./pages/endpoints.tsx";
import { FailuresPage } from "./pages/failures.tsx";
import { KeysPage } from "./pages/keys.tsx";
import { MembersPage } from "./pages/members.tsx";
import { NotificationsPage } from "./pages/notifications.tsx";
import { PolicyPage } from "./pages/policy.tsx";
import { RecoveriesPage } from "./pages/recoveries.tsx";
import { RequestPage } from "./pages/request.tsx";
import { RequestsPage } from "./pages/requests.tsx";
import { RetentionPage } from "./pages/retention.tsx";
import { SchedulesPage } from "./pages/schedules.tsx";
import { SignInPage } from "./pages/sign-in.tsx";
import { UsagePage } from "./pages/usage.tsx";
import { ProjectContext, projectPath } from "./project.ts";
import { Link, matchPath, navigate, type Segments, useLocation } from "./router.tsx";
import { type Membership, signOut, useMemberships } from "./session.ts";
import { transportFor } from "./transport.ts";

const queryClient = new QueryClient({
  defaultOptions: { queries: { retry: retryable, refetchOnWindowFocus: true } },
});

export function App() {
  return (
    <QueryClientProvider client={queryClient}>
      <Routes />
    </QueryClientProvider>
  );
}

/** A project's pages, by the path after /panel/{project}. */
type Params = Record<string, string>;
const projectRoutes: [
  string,
  (params: Params) => ReactNode,
  string | ((params: Params) => string),
][] = [
  ["", () => <EndpointsPage />, "Endpoints"],
  ["/endpoints", () => <EndpointsPage />, "Endpoints"],
  ["/endpoints/new", () => <NewEndpointPage />, "New endpoint"],
  [
    "/endpoints/:line/:path",
    (p) => <EndpointPage line={p.line ?? ""} path={p.path ?? ""} />,
    (p) => `Endpoint ${p.line}/${p.path}`,
  ],
  ["/keys", () => <KeysPage />, "API keys"],
  ["/requests", () => <RequestsPage />, "Request log"],
  ["/requests/:requestId", (p) => <RequestPage requestId={p.requestId ?? ""} />, "Request"],
  ["/failures", () => <FailuresPage />, "Failure queue"],
  ["/recoveries", () => <RecoveriesPage />, "Recovery jobs"],
  ["/schedules", () => <SchedulesPage />, "Schedules"],
  ["/usage", () => <UsagePage />, "Usage"],
  ["/policy", () => <PolicyPage />, "Key policy"],
  ["/retention", () => <RetentionPage />, "Retention"],
  ["/members", () => <MembersPage />, "Members"],
  ["/notifications", () => <NotificationsPage />, "Notifications"],
];

const sections: [string, string][] = [
  ["endpoints", "Endpoints"],
  ["keys", "API keys"],
  ["requests", "Request log"],
  ["failures", "Failure queue"],
  ["recoveries", "Recovery jobs"],
  ["schedules", "Schedules"],
  ["usage", "Usage"],
  ["policy", "Key policy"],
  ["retention", "Retention"],
  ["members", "Members"],
  ["notifications", "Notifications"],
];

function Routes() {
  const { segments } = useLocation();
  const memberships = useMemberships();
  // The control plane serves this page at "/" and under /panel/, whose next part is the project.
  const [, slug, ...rest] = segments;
  const membership = memberships.find((m) => m.project === slug);

  if (slug !== null && !membership) {
    return (
      <Frame title="Sign in" memberships={memberships}>
        <SignInPage unknownProject={slug} />
      </Frame>
    );
  }
  const route = membership && projectRoute(rest);
  if (!membership || !route) {
    return (
      <Frame title="Not found" memberships={memberships} current={membership}>
        <p>There is no such page. Pick one from the navigation.</p>
      </Frame>
    );
  }
  return (
    <ProjectContext.Provider value={membership}>
      <TransportProvider transport={transportFor(membership.token)}>
        <Frame title={route.title} memberships={memberships} current={membership}>
          <DeliveryWarning project={membership.project} />
          {route.page}
        </Frame>
      </TransportProvider>
    </ProjectContext.Provider>
  );
}

/** The project page at these segments (after /panel/{project}), or null. */
function projectRoute(segments: Segments): { page: ReactNode; title: string } | null {
  for (const [pattern, page, title] of projectRoutes) {
    const params = matchPath(pattern, segments);
    if (params)
      return { page: page(params), title: typeof title === "string" ? title : title(params) };
  }
  return null;
}

/** While deliveries wait with no worker to take them: every project page says so. */
function DeliveryWarning({ project }: { project: string }) {
  const details = useQuery(
    ProjectService.method.getProject,
    { project },
    { refetchInterval: 10_000 },
  );
  const warning = details.data?.deliveryWarning;
  if (!warning) return null;
  return (
    <section className="notice notice-failed" role="alert" aria-label="Deliveries are waiting">
      <strong>Deliveries are waiting: no worker is taking them.</strong> Calls are still accepted
      and will be delivered once a worker runs. ({warning})
    </section>
  );
}

function Frame({
  title,
  memberships,
  current,
  children,
}: {
  title: string;
  memberships: Membership[];
  current?: Membership;
  children: ReactNode;
}) {
  const { pathname } = useLocation();
  const heading = useRef<HTMLHeadingElement>(null);
  // Each page change is announced and starts keyboard focus at the page's heading.
  useEffect(() => {
    document.title = current ? `${title} · ${current.project} · Relay` : `${title} · Relay`;
    heading.current?.focus();
  }, [title, current]);
  return (
    <>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <Link to="/" className="brand">
          Relay
        </Link>
        {memberships.length > 0 && (
          <label className="project-picker">
            <span>Project</span>
            <select
              value={current?.project ?? ""}
              onChange={(e) => navigate(e.target.value ? projectPath(e.target.value) : "/")}
            >
              {!current && <option value="">Choose a project…</option>}
              {memberships.map((m) => (
                <option key={m.project} value={m.project}>
                  {m.projectName} ({m.project})
                </option>
              ))}
            </select>
          </label>
        )}
        {current && (
          <span className="whoami">
            {current.memberName} ({current.role})
            <button
              type="button"
              className="link"
              onClick={() => {
                signOut(current.token);
                navigate("/");
              }}
            >
              Sign out
            </button>
          </span>
        )}
      </header>
      {current && (
        <nav aria-label="Project" className="sections">
          <ul>
            {sections.map(([section, label]) => {
              const to = projectPath(current.project, section);
              const active =
                pathname.startsWith(to) ||
                (section === "endpoints" &&
                  pathname.replace(/\/$/, "") === projectPath(current.project));
              return (
                <li key={section}>
                  <Link to={to} aria-current={active ? "page" : undefined}>
                    {label}
                  </Link>
                </li>
              );
            })}
          </ul>
        </nav>
      )}
      <main id="main">
        <h1 ref={heading} tabIndex={-1}>
          {title}
        </h1>
        {children}
      </main>
    </>
  );
}
