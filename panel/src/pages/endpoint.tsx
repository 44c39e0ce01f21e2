/**
 * One endpoint: its inbound URL, a copyable example request, its targets (with their filters,
 * retry policies and transformations), their delivery control (circuits, pauses), its signing
 * secret (shown once at creation and at each rotation), its settings (edited in place) and
 * deletion. Also the page that creates an endpoint.
 */
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { useState } from "react";
import { ProjectService } from "../../../gen/relay/v1/projects_pb.ts";
import {
  DeliveryMode,
  type Endpoint,
  EndpointService,
  Ordering,
  type TargetRetry,
} from "../../../gen/relay/v1/routing_pb.ts";
import { problemOf } from "../errors.ts";
import { curlExample, keyPlaceholder, sampleFor } from "../example.ts";
import { deliveryModeNames, formatTime } from "../model.ts";
import { projectPath, useInvalidate, useProject } from "../project.ts";
import { Link, navigate, useLocation } from "../router.tsx";
import { ConfirmButton, CopyButton, FormError, Loaded, OneTimeSecret } from "../ui.tsx";
import { DeliveryControl } from "./delivery-control.tsx";
import { EndpointForm } from "./endpoint-form.tsx";

export function NewEndpointPage() {
  const { project } = useProject();
  const line = useLocation().search.get("line") ?? "";
  const invalidate = useInvalidate(EndpointService);
  const create = useMutation(EndpointService.method.createEndpoint, { onSuccess: invalidate });
  const created = create.data?.endpoint;
  if (created) {
    // The signing secret exists only in this answer, so it is shown before moving on.
    return (
      <SigningSecret
        secret={create.data?.signingSecret ?? ""}
        heading={`Endpoint ${created.line}/${created.path} created: its signing secret`}
        onDone={() => navigate(projectPath(project, "endpoints", created.line, created.path))}
        doneLabel="I have copied it: go to the endpoint"
      />
    );
  }
  if (!line) {
    return (
      <p>
        Choose the line for the new endpoint on the{" "}
        <Link to={projectPath(project, "endpoints")}>endpoints page</Link>.
      </p>
    );
  }
  return (
    <>
      <p>
        In line <code>{line}</code>.
      </p>
      <EndpointForm
        saving={create.isPending}
        problem={create.error ? problemOf(create.error) : null}
        onSave={(spec) => create.mutate({ project, line, endpoint: spec })}
        submitLabel="Create endpoint"
      />
    </>
  );
}

export function EndpointPage({ line, path }: { line: string; path: string }) {
  const { project, token } = useProject();
  const endpoint = useQuery(EndpointService.method.getEndpoint, { project, line, path });
  const invalidate = useInvalidate(EndpointService);
  const update = useMutation(EndpointService.method.updateEndpoint, {
    onSuccess: async ({ endpoint }) => {
      await invalidate();
      if (endpoint && endpoint.path !== path) {
        navigate(projectPath(project, "endpoints", endpoint.line, endpoint.path), {
          replace: true,
        });
      }
    },
  });
  const remove = useMutation(EndpointService.method.deleteEndpoint, {
    onSuccess: async () => {
      await invalidate();
      navigate(projectPath(project, "endpoints"));
    },
  });
  return (
    <Loaded query={endpoint} token={token}>
      {({ endpoint }) =>
        endpoint && (
          <>
            <p className="muted">
              Version {endpoint.version}, changed {formatTime(endpoint.updatedAt)}.
            </p>
            <ExampleRequest endpoint={endpoint} />
            <DeliveryControl line={line} path={path} targets={endpoint.targets} />
            <section className="card" aria-labelledby="settings">
              <h2 id="settings">Settings</h2>
              {update.isSuccess && (
                <p role="status" className="saved">
                  Saved.
                </p>
              )}
              <EndpointForm
                key={endpoint.version}
                endpoint={endpoint}
                saving={update.isPending}
                problem={update.error ? problemOf(update.error) : null}
                onSave={(spec) => update.mutate({ project, line, path, endpoint: spec })}
                submitLabel="Save changes"
              />
            </section>
            <RotateSigningSecret line={line} path={path} />
            <section className="card" aria-labelledby="danger">
              <h2 id="danger">Delete</h2>
              <p>Calls to this endpoint will be answered 404 at once; its request log stays.</p>
              <ConfirmButton
                label="Delete endpoint"
                question={`Delete ${line}/${path}?`}
                confirmLabel="Yes, delete it"
                onConfirm={() => remove.mutate({ project, line, path })}
              />
              <FormError problem={remove.error ? problemOf(remove.error) : null} />
            </section>
          </>
        )
      }
    </Loaded>
  );
}

/** The endpoint's real inbound URL in a curl command whose body satisfies its schema. */
function ExampleRequest({ endpoint }: { endpoint: Endpoint }) {
  const { project, token } = useProject();
  const details = useQuery(ProjectService.method.getProject, { project });
  const stream = endpoint.targets.some((t) => t.deliveryMode === DeliveryMode.STREAM);
  const sync = endpoint.targets.some((t) => t.deliveryMode === DeliveryMode.SYNC);
  return (
    <section className="card" aria-labelledby="example">
      <h2 id="example">Example request</h2>
      <Loaded query={details} token={token}>
        {({ inboundUrl }) => {
          const url = `${inboundUrl}/${endpoint.line}/${endpoint.path}`;
          const curl = curlExample(url, sampleFor(endpoint.schema), stream);
          return (
            <>
              <p>
                Inbound URL: <code data-testid="inbound-url">{url}</code>
              </p>
              <pre className="code" data-testid="example-curl">
                {curl}
              </pre>
              <CopyButton text={curl} label="Copy example request" />
              <p className="hint">
                Replace <code>{keyPlaceholder}</code> with an API key of this project (see{" "}
                <Link to={projectPath(project, "keys")}>API keys</Link>).{" "}
                {stream
                  ? "The stream target's answer arrives as it is sent (curl -N prints it unbuffered)."
                  : sync
                    ? "The sync target's answer comes back as the call's answer."
                    : 'The answer is 202 {"status":"queued","requestId":…}; follow it in the request log.'}
              </p>
            </>
          );
        }}
      </Loaded>
      <p data-testid="ordering">
        {endpoint.ordering === Ordering.FIFO
          ? "Ordered (fifo): async deliveries reach each target in accept order per Relay-Ordering-Key, one at a time."
          : "Unordered: async deliveries go as they come."}
      </p>
      <h3>Targets</h3>
      <ul>
        {endpoint.targets.map((t) => (
          <li key={t.id}>
            <strong>{t.name}</strong> ({deliveryModeNames[t.deliveryMode]}
            {t.deliveryMode !== DeliveryMode.ASYNC && `, ${t.timeoutSeconds ?? 30} s timeout`}):{" "}
            <code>{t.targetUrl}</code>
            {t.filter && (
              <>
                , only calls matching{" "}
                <code data-testid="target-filter">{JSON.stringify(t.filter)}</code>
              </>
            )}
            {t.retry && (
              <>
                , <span data-testid="target-retry">{retryPolicyOf(t.retry)}</span>
              </>
            )}
            {t.transform && (
              <details className="target-transform">
                <summary>Its transformation</summary>
                <pre className="code" data-testid="target-transform">
                  {t.transform}
                </pre>
              </details>
            )}
          </li>
        ))}
      </ul>
    </section>
  );
}

/**
 * A target's own retry policy as read, only the settings it sets (the rest are the
 * deployment's): "retries: at most 5 attempts, from 2 s ×1.5, up to 60 s apart, for 3600 s".
 */
function retryPolicyOf(retry: TargetRetry): string {
  const { maxAttempts, initialIntervalSeconds, backoffCoefficient } = retry;
  const { maximumIntervalSeconds, windowSeconds } = retry;
  const growth = [
    initialIntervalSeconds && `from ${initialIntervalSeconds} s`,
    backoffCoefficient && `×${backoffCoefficient}`,
  ].filter(Boolean);
  const settings = [
    maxAttempts && `at most ${maxAttempts} ${maxAttempts === 1 ? "attempt" : "attempts"}`,
    growth.join(" "),
    maximumIntervalSeconds && `up to ${maximumIntervalSeconds} s apart`,
    windowSeconds && `for ${windowSeconds} s`,
  ].filter(Boolean);
  return `retries: ${settings.join(", ")}`;
}

/**
 * A signing secret's one showing. Targets verify deliveries with it (any Standard Webhooks
 * library); Relay keeps it only sealed.
 */
function SigningSecret(props: {
  secret: string;
  heading: string;
  onDone: () => void;
  doneLabel: string;
}) {
  return (
    <OneTimeSecret
      {...props}
      testId="signing-secret"
      warning={
        <>
          Copy this secret now and give it to the target: it is shown only this once. Deliveries
          carry webhook-id, webhook-timestamp and webhook-signature headers signed with it.
        </>
      }
    />
  );
}

/** A new signing secret; the previous one keeps signing beside it for 24 hours. */
function RotateSigningSecret({ line, path }: { line: string; path: string }) {
  const { project } = useProject();
  const rotate = useMutation(EndpointService.method.rotateSigningSecret);
  const [shown, setShown] = useState(false);
  return (
    <section className="card" aria-labelledby="signing">
      <h2 id="signing">Signing secret</h2>
      {rotate.data && shown ? (
        <SigningSecret
          secret={rotate.data.signingSecret}
          heading="The new signing secret"
          onDone={() => setShown(false)}
          doneLabel="I have copied it"
        />
      ) : (
        <>
          <p>
            Rotating makes a new secret; the current one keeps signing beside it for 24 hours, so
            targets can switch over without missing a delivery.
          </p>
          <ConfirmButton
            label="Rotate signing secret"
            question={`Make a new signing secret for ${line}/${path}?`}
            confirmLabel="Yes, rotate it"
            onConfirm={() =>
              rotate.mutate({ project, line, path }, { onSuccess: () => setShown(true) })
            }
          />
        </>
      )}
      <FormError problem={rotate.error ? problemOf(rotate.error) : null} />
    </section>
  );
}
