/** The demo project `npm start` creates once, through the public REST API. */

export interface DemoSeed {
  ownerToken: string;
  liveKey: string;
}

export const DEMO = { project: "demo", line: "v1", endpoint: "echo" } as const;

/** Creates the demo project unless it exists; null when it already did. */
export async function seedDemo(options: {
  controlUrl: string;
  adminToken: string;
  demoUrl: string;
}): Promise<DemoSeed | null> {
  const call = async (token: string, method: string, path: string, body?: unknown) => {
    const response = await fetch(`${options.controlUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    if (!response.ok && response.status !== 404) {
      throw new Error(`${method} ${path} answered ${response.status}: ${text}`);
    }
    return {
      status: response.status,
      body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
    };
  };
  const existing = await call(options.adminToken, "GET", `/projects/${DEMO.project}`);
  if (existing.status === 200) return null;

  const created = await call(options.adminToken, "POST", "/projects", {
    slug: DEMO.project,
    name: "Demo",
    plan: "free",
  });
  const ownerToken = created.body.ownerToken as string;
  const base = `/projects/${DEMO.project}`;
  await call(ownerToken, "POST", `${base}/lines`, { key: DEMO.line });
  await call(ownerToken, "POST", `${base}/lines/${DEMO.line}/endpoints`, {
    path: DEMO.endpoint,
    targets: [
      { name: "demo-receiver", targetUrl: `${options.demoUrl}/hook`, deliveryMode: "async" },
    ],
  });
  const minted = await call(ownerToken, "POST", `${base}/keys`, { name: "demo", mode: "live" });
  return { ownerToken, liveKey: minted.body.plaintext as string };
}
