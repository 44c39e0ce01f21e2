/**
 * What the request log keeps of a request and of each attempt's answer: headers as a table, a
 * body as JSON pretty-printed, other text as it is, or binary as its size and a hex preview; and
 * erasing it once the request is finished (confirmed first: it cannot be undone).
 */
import { useMutation } from "@connectrpc/connect-query";
import { fromBase64 } from "../../../core/base64.ts";
import { hexPreview } from "../../../core/inspect.ts";
import { FailureQueueService } from "../../../gen/relay/v1/recoveries_pb.ts";
import {
  type Body,
  BodyEncoding,
  type Request,
  RequestLogService,
  type Response,
} from "../../../gen/relay/v1/requests_pb.ts";
import { problemOf } from "../errors.ts";
import { finished, formatTime } from "../model.ts";
import { useInvalidate, useProject } from "../project.ts";
import { ConfirmButton, FormError } from "../ui.tsx";

/** The request's headers and body as received; a note when the log did not keep them. */
export function ReceivedContent({ request }: { request: Request }) {
  return (
    <section className="card" aria-label="Request as received">
      <h2>As received</h2>
      {request.headers ? (
        <HeaderTable headers={request.headers.values} caption="Inbound headers" />
      ) : request.contentErasedAt ? (
        <p className="muted" data-testid="request-erased">
          Headers, body and answers erased at {formatTime(request.contentErasedAt)}.
        </p>
      ) : (
        <p className="muted" data-testid="request-not-kept">
          Headers and body not kept: this request was logged before the log kept them.
        </p>
      )}
      {request.body && <BodyView body={request.body} label="Request body" />}
      {finished(request.status) && !request.contentErasedAt && (
        <EraseContent requestId={request.requestId} />
      )}
    </section>
  );
}

/** Erases the request's headers, body and answers from the log, once confirmed. */
function EraseContent({ requestId }: { requestId: string }) {
  const { project } = useProject();
  const invalidate = useInvalidate(RequestLogService, FailureQueueService);
  const erase = useMutation(RequestLogService.method.eraseRequestContent, {
    onSuccess: () => invalidate(),
  });
  return (
    <div className="erase">
      <ConfirmButton
        label="Erase content"
        question="Erase its headers, body and every answer for good? It can then be neither replayed nor sent again."
        confirmLabel="Erase for good"
        disabled={erase.isPending}
        onConfirm={() => erase.mutate({ project, requestId })}
      />
      <FormError problem={erase.error ? problemOf(erase.error) : null} />
    </div>
  );
}

/** An attempt's answer: its headers and body, "truncated at 64 KiB" when it was longer. */
export function AnswerContent({ response }: { response: Response }) {
  return (
    <div className="answer" data-testid="attempt-answer">
      <HeaderTable headers={response.headers} caption="Answer headers" />
      {response.body && <BodyView body={response.body} label="Answer body" />}
      {response.truncated && (
        <p className="warning" data-testid="answer-truncated">
          Truncated at 64 KiB: the answer was longer.
        </p>
      )}
    </div>
  );
}

function HeaderTable({ headers, caption }: { headers: Record<string, string>; caption: string }) {
  const names = Object.keys(headers).sort();
  return (
    <table className="headers">
      <caption>{caption}</caption>
      <tbody>
        {names.length === 0 && (
          <tr>
            <td className="muted">none</td>
          </tr>
        )}
        {names.map((name) => (
          <tr key={name}>
            <th scope="row">{name}</th>
            <td>
              <code>{headers[name]}</code>
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

/** How a body is shown, by what it is. */
type BodyKind = "empty" | "json" | "text" | "binary";

function bodyKind(body: Body): BodyKind {
  if (body.bytes === 0n) return "empty";
  if (body.encoding !== BodyEncoding.UTF8) return "binary";
  try {
    JSON.parse(body.text);
    return "json";
  } catch {
    return "text";
  }
}

function BodyView({ body, label }: { body: Body; label: string }) {
  const kind = bodyKind(body);
  const size = `${body.bytes.toString()} bytes`;
  return (
    <figure className="body" data-body-kind={kind}>
      <figcaption>
        {label} · {kind === "binary" ? `${size}, binary: the first 256 in hex` : size}
      </figcaption>
      {kind === "empty" && <p className="muted">empty</p>}
      {kind === "json" && (
        <pre className="code">{JSON.stringify(JSON.parse(body.text), null, 2)}</pre>
      )}
      {kind === "text" && <pre className="code">{body.text}</pre>}
      {kind === "binary" && <pre className="code">{hexPreview(fromBase64(body.text))}</pre>}
    </figure>
  );
}
