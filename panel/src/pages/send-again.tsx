/**
 * "Send again": a new request to the same endpoint with this one's headers and its body, edited
 * here when it is text. The API checks it as it checks a call (size, schema) and its page opens.
 */
import { useMutation } from "@connectrpc/connect-query";
import { type FormEvent, useState } from "react";
import { FailureQueueService } from "../../../gen/relay/v1/recoveries_pb.ts";
import {
  BodyEncoding,
  type Request,
  RequestLogService,
} from "../../../gen/relay/v1/requests_pb.ts";
import { problemOf } from "../errors.ts";
import { projectPath, useInvalidate, useProject } from "../project.ts";
import { navigate } from "../router.tsx";
import { Field, FormError } from "../ui.tsx";

export function SendAgain({ request }: { request: Request }) {
  const { project } = useProject();
  const original = request.body;
  const editable = original?.encoding === BodyEncoding.UTF8;
  const [text, setText] = useState(editable ? original.text : "");
  const invalidate = useInvalidate(RequestLogService, FailureQueueService);
  const send = useMutation(RequestLogService.method.sendAgain, {
    onSuccess: async ({ request: sent }) => {
      await invalidate();
      if (sent) navigate(projectPath(project, "requests", sent.requestId));
    },
  });
  if (!request.headers || !original) return null;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const edited = editable && text !== original.text;
    send.mutate({
      project,
      requestId: request.requestId,
      ...(edited && { body: { encoding: BodyEncoding.UTF8, text } }),
    });
  };
  const problem = send.error ? problemOf(send.error) : null;
  // The endpoint's schema names places in the body ("/order"), each said under the body.
  const bodyError = problem
    ? Object.entries(problem.fields)
        .map(([path, message]) => (path === "body.text" ? message : `${path}: ${message}`))
        .join("; ") || undefined
    : undefined;
  return (
    <form className="card" aria-label="Send again" onSubmit={submit} noValidate>
      <h2>Send again</h2>
      <p className="hint">
        A new request to {request.line}/{request.endpoint} with this request's headers, checked and
        billed like any call; this one stays as it is.
      </p>
      {editable ? (
        <Field label="Body to send" hint="Edit it, or send it as it was." error={bodyError}>
          {(control) => (
            <textarea
              {...control}
              name="body"
              rows={Math.min(16, Math.max(4, text.split("\n").length + 1))}
              spellCheck={false}
              value={text}
              onChange={(e) => setText(e.target.value)}
            />
          )}
        </Field>
      ) : (
        <p>The body is binary: it is sent as it was.</p>
      )}
      <button type="submit" disabled={send.isPending}>
        Send again
      </button>
      <FormError problem={problem} />
    </form>
  );
}
