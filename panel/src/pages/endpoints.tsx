/** Lines and their endpoints: the project's inbound URLs at a glance, lines added and removed. */
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { type FormEvent, useState } from "react";
import { EndpointService, type Line, LineService } from "../../../gen/relay/v1/routing_pb.ts";
import { fieldError, problemOf } from "../errors.ts";
import { deliveryModeNames } from "../model.ts";
import { projectPath, useInvalidate, useProject } from "../project.ts";
import { Link } from "../router.tsx";
import { ConfirmButton, Field, FormError, Loaded } from "../ui.tsx";

export function EndpointsPage() {
  const { project, token } = useProject();
  const lines = useQuery(LineService.method.listLines, { project });
  return (
    <>
      <p>
        A call goes to{" "}
        <code>
          /{"{line}"}/{"{endpoint}"}
        </code>{" "}
        on the project's inbound host. Lines group endpoints, for example by API version.
      </p>
      <Loaded query={lines} token={token}>
        {({ lines }) =>
          lines.length === 0 ? (
            <p>No lines yet. Add one below, then its endpoints.</p>
          ) : (
            lines.map((line) => <LineSection key={line.key} line={line} />)
          )
        }
      </Loaded>
      <NewLineForm />
    </>
  );
}

function LineSection({ line }: { line: Line }) {
  const { project, token } = useProject();
  const endpoints = useQuery(EndpointService.method.listEndpoints, { project, line: line.key });
  const invalidate = useInvalidate(LineService, EndpointService);
  const remove = useMutation(LineService.method.deleteLine, { onSuccess: invalidate });
  const headingId = `line-${line.key}`;
  return (
    <section className="card" aria-labelledby={headingId}>
      <div className="row">
        <h2 id={headingId}>
          Line <code>{line.key}</code>
        </h2>
        <Link
          className="button"
          to={`${projectPath(project, "endpoints", "new")}?line=${encodeURIComponent(line.key)}`}
        >
          New endpoint in {line.key}
        </Link>
        <ConfirmButton
          label={`Delete line ${line.key}`}
          question={`Delete line ${line.key} and all its endpoints?`}
          confirmLabel="Yes, delete"
          onConfirm={() => remove.mutate({ project, key: line.key })}
        />
      </div>
      {remove.error && <FormError problem={problemOf(remove.error)} />}
      <Loaded query={endpoints} token={token}>
        {({ endpoints }) =>
          endpoints.length === 0 ? (
            <p>No endpoints in this line yet.</p>
          ) : (
            <table>
              <caption className="visually-hidden">Endpoints of line {line.key}</caption>
              <thead>
                <tr>
                  <th scope="col">Endpoint</th>
                  <th scope="col">Targets</th>
                  <th scope="col">Schema</th>
                  <th scope="col">Rate limit</th>
                </tr>
              </thead>
              <tbody>
                {endpoints.map((e) => (
                  <tr key={e.path}>
                    <td>
                      <Link to={projectPath(project, "endpoints", e.line, e.path)}>
                        {e.line}/{e.path}
                      </Link>
                    </td>
                    <td>
                      {e.targets
                        .map((t) => `${t.name} (${deliveryModeNames[t.deliveryMode]})`)
                        .join(", ")}
                    </td>
                    <td>{e.schema ? "yes" : "none"}</td>
                    <td>
                      {e.rateLimit
                        ? `${e.rateLimit.requestsPerSecond}/s, burst ${e.rateLimit.burst}`
                        : "plan default"}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )
        }
      </Loaded>
    </section>
  );
}

function NewLineForm() {
  const { project } = useProject();
  const [key, setKey] = useState("");
  const invalidate = useInvalidate(LineService);
  const create = useMutation(LineService.method.createLine, {
    onSuccess: async () => {
      setKey("");
      await invalidate();
    },
  });
  const problem = create.error ? problemOf(create.error) : null;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    create.mutate({ project, key });
  };
  return (
    <form className="card narrow" onSubmit={submit} aria-labelledby="new-line" noValidate>
      <h2 id="new-line">Add a line</h2>
      <Field
        label="Line key"
        hint="The first path segment, such as v1."
        error={fieldError(problem, "key")}
      >
        {(control) => (
          <input {...control} name="key" value={key} onChange={(e) => setKey(e.target.value)} />
        )}
      </Field>
      <FormError problem={problem} />
      <button type="submit" disabled={create.isPending}>
        Add line
      </button>
    </form>
  );
}
