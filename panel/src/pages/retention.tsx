/**
 * How long the project keeps its requests' headers, bodies and answers: owners set it within the
 * plan's bounds (the daily run erases older content); editors see it read-only. Owners may also
 * delete the whole project here, its slug typed and asked twice.
 */
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { type FormEvent, useState } from "react";
import { ProjectService } from "../../../gen/relay/v1/projects_pb.ts";
import { RequestLogService, type Retention } from "../../../gen/relay/v1/requests_pb.ts";
import { fieldError, problemOf } from "../errors.ts";
import { useInvalidate, useProject } from "../project.ts";
import { signOut } from "../session.ts";
import { ConfirmButton, DaysField, Field, FormError, Loaded, OwnersForm } from "../ui.tsx";

export function RetentionPage() {
  const { project, token, role } = useProject();
  const retention = useQuery(RequestLogService.method.getRetention, { project });
  return (
    <>
      <Loaded query={retention} token={token}>
        {({ retention }) => retention && <RetentionForm retention={retention} />}
      </Loaded>
      {role === "owner" && <DeleteProject />}
    </>
  );
}

/** Deletes the project: its slug typed first, then asked twice; the session then ends. */
function DeleteProject() {
  const { project, token } = useProject();
  const [typed, setTyped] = useState("");
  const remove = useMutation(ProjectService.method.deleteProject, {
    onSuccess: () => signOut(token),
  });
  return (
    <section aria-labelledby="delete-project">
      <h2 id="delete-project">Delete this project</h2>
      <p>
        Everything goes: its keys stop working at once, and its endpoints, schedules, requests with
        their bodies and attempts, credits and members are deleted, its Temporal histories too. Its
        name is not given out again.
      </p>
      <Field label={`Type ${project} to confirm`}>
        {(control) => (
          <input
            {...control}
            name="confirm"
            value={typed}
            onChange={(e) => setTyped(e.target.value)}
          />
        )}
      </Field>
      <ConfirmButton
        label="Delete project"
        question={`Delete ${project} and everything it has?`}
        confirmLabel="Yes, delete it"
        disabled={typed !== project || remove.isPending}
        onConfirm={() => remove.mutate({ project })}
      />
      <FormError problem={remove.error ? problemOf(remove.error) : null} />
    </section>
  );
}

function RetentionForm({ retention }: { retention: Retention }) {
  const { project, role } = useProject();
  const readOnly = role !== "owner";
  const [days, setDays] = useState(retention.retentionDays?.toString() ?? "");
  const [local, setLocal] = useState<string | undefined>();
  const invalidate = useInvalidate(RequestLogService);
  const save = useMutation(RequestLogService.method.setRetention, {
    onSuccess: () => invalidate(),
  });
  const problem = save.error ? problemOf(save.error) : null;

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const value = days.trim() === "" ? undefined : Number(days);
    const wrong = value !== undefined && !Number.isInteger(value);
    setLocal(wrong ? "must be a whole number of days" : undefined);
    if (!wrong) save.mutate({ project, ...(value !== undefined && { retentionDays: value }) });
  };

  return (
    <OwnersForm
      id="retention"
      readOnly={readOnly}
      readOnlyNote="Only owners can change how long content is kept. You are an editor, so it is shown read-only."
      note="Each day, the content of finished requests older than this is erased; the requests, their statuses and attempts stay in the log."
      legend="Request content"
      onSubmit={submit}
      problem={problem}
      saved={save.isSuccess}
      saving={save.isPending}
      submitLabel="Save retention"
    >
      <DaysField
        label="Keep headers, bodies and answers (days)"
        hint={`At most ${retention.maxRetentionDays} on this project's plan; empty: as long as the log keeps the request.`}
        error={local ?? fieldError(problem, "retentionDays")}
        name="retentionDays"
        value={days}
        onChange={setDays}
      />
    </OwnersForm>
  );
}
