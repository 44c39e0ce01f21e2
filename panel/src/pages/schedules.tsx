/**
 * Schedules: the project's crons, each firing its stored call at an endpoint through the edge as
 * a caller's call would go. A form makes one; the table shows each one's last fire, and fires,
 * pauses, resumes or deletes it.
 */
import { fromJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { type FormEvent, useState } from "react";
import { RequestLogService } from "../../../gen/relay/v1/requests_pb.ts";
import { type Schedule, ScheduleService } from "../../../gen/relay/v1/schedules_pb.ts";
import { fieldError, problemOf } from "../errors.ts";
import { formatTime } from "../model.ts";
import { projectPath, useInvalidate, useProject } from "../project.ts";
import { Link } from "../router.tsx";
import { CodeArea, ConfirmButton, Field, FormError, Loaded, StatusBadge } from "../ui.tsx";

export function SchedulesPage() {
  const { project, token } = useProject();
  const schedules = useQuery(ScheduleService.method.listSchedules, { project });
  return (
    <>
      <p>
        A schedule sends its call to an endpoint when its cron says, through the whole pipeline as a
        caller's call: the endpoint's schema, rate limits and credits apply, each target gets it in
        its mode, and each fire is in the request log.
      </p>
      <ScheduleForm />
      <Loaded query={schedules} token={token}>
        {({ schedules }) => <ScheduleTable schedules={schedules} />}
      </Loaded>
    </>
  );
}

function ScheduleForm() {
  const { project } = useProject();
  const [values, setValues] = useState({ endpoint: "", cron: "", timeZone: "UTC", note: "" });
  const [body, setBody] = useState("");
  const [bodyProblem, setBodyProblem] = useState<string>();
  const invalidate = useInvalidate(ScheduleService);
  const create = useMutation(ScheduleService.method.createSchedule, {
    onSuccess: async () => {
      setValues({ endpoint: "", cron: "", timeZone: "UTC", note: "" });
      setBody("");
      await invalidate();
    },
  });
  const problem = create.error ? problemOf(create.error) : null;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    let parsed: unknown;
    try {
      parsed = body.trim() ? JSON.parse(body) : undefined;
      setBodyProblem(undefined);
    } catch {
      setBodyProblem("must be JSON");
      return;
    }
    const [line = "", path = ""] = values.endpoint.split("/");
    const { cron, timeZone, note } = values;
    create.mutate({
      project,
      line,
      path,
      spec: {
        cron,
        timeZone,
        note,
        ...(parsed !== undefined && { body: fromJson(ValueSchema, parsed as never) }),
      },
    });
  };
  const text = (name: keyof typeof values, label: string, hint?: string) => (
    <Field label={label} hint={hint} error={fieldError(problem, name)}>
      {(control) => (
        <input
          {...control}
          name={name}
          value={values[name]}
          onChange={(e) => setValues({ ...values, [name]: e.target.value })}
        />
      )}
    </Field>
  );
  return (
    <form className="filters row" onSubmit={submit} aria-label="New schedule" noValidate>
      {text("endpoint", "Endpoint", "line/endpoint")}
      {text("cron", "Cron", "minute hour day month weekday, or @daily")}
      {text("timeZone", "Time zone", "IANA, such as Europe/Paris")}
      {text("note", "Note", "What it is for")}
      <Field
        label="Body"
        hint="JSON; empty: none"
        error={bodyProblem ?? fieldError(problem, "body")}
      >
        {(control) => (
          <CodeArea control={control} name="body" text={body} onText={setBody} maxRows={8} />
        )}
      </Field>
      <button type="submit" disabled={create.isPending}>
        Create schedule
      </button>
      <FormError problem={problem} />
    </form>
  );
}

function ScheduleTable({ schedules }: { schedules: Schedule[] }) {
  const { project } = useProject();
  const invalidate = useInvalidate(ScheduleService, RequestLogService);
  const options = { onSuccess: () => invalidate() };
  const trigger = useMutation(ScheduleService.method.triggerSchedule, options);
  const update = useMutation(ScheduleService.method.updateSchedule, options);
  const remove = useMutation(ScheduleService.method.deleteSchedule, options);
  const failed = trigger.error ?? update.error ?? remove.error;
  if (schedules.length === 0) return <p>No schedule yet.</p>;
  return (
    <>
      <FormError problem={failed ? problemOf(failed) : null} />
      <table className="schedules">
        <caption className="visually-hidden">Schedules</caption>
        <thead>
          <tr>
            <th scope="col">Endpoint</th>
            <th scope="col">Cron</th>
            <th scope="col">State</th>
            <th scope="col">Fires</th>
            <th scope="col">Last fire</th>
            <th scope="col">
              <span className="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {schedules.map((s) => (
            <tr key={s.scheduleId}>
              <td>
                <code>{s.endpoint}</code>
                {s.note && <> · {s.note}</>}
              </td>
              <td>
                <code>{s.cron}</code> ({s.timeZone})
              </td>
              <td>
                <StatusBadge status={s.paused ? "paused" : "active"} />
              </td>
              <td>{s.fires}</td>
              <td>
                {formatTime(s.lastFiredAt)}
                {s.lastStatus !== undefined && <> · {s.lastStatus}</>}
                {s.lastRequestId && (
                  <>
                    {" "}
                    <Link to={projectPath(project, "requests", s.lastRequestId)}>request</Link>
                  </>
                )}
              </td>
              <td>
                <button
                  type="button"
                  onClick={() => trigger.mutate({ project, scheduleId: s.scheduleId })}
                  aria-label={`Fire ${s.scheduleId} now`}
                >
                  Fire now
                </button>{" "}
                <button
                  type="button"
                  onClick={() =>
                    update.mutate({
                      project,
                      scheduleId: s.scheduleId,
                      spec: { paused: !s.paused },
                    })
                  }
                  aria-label={`${s.paused ? "Resume" : "Pause"} ${s.scheduleId}`}
                >
                  {s.paused ? "Resume" : "Pause"}
                </button>{" "}
                <ConfirmButton
                  label="Delete"
                  question={`Delete the schedule ${s.cron} on ${s.endpoint}?`}
                  confirmLabel="Yes, delete it"
                  onConfirm={() => remove.mutate({ project, scheduleId: s.scheduleId })}
                />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}
