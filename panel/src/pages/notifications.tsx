/**
 * The project's notification URL: set, changed or removed, and its `whsec_` secret, shown once
 * when it is made (the first set, each rotation) until the member dismisses it.
 */
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { type FormEvent, useState } from "react";
import { NotificationService, type Notifications } from "../../../gen/relay/v1/notifications_pb.ts";
import { fieldError, problemOf } from "../errors.ts";
import { formatTime } from "../model.ts";
import { useInvalidate, useProject } from "../project.ts";
import { ConfirmButton, Field, FormError, Loaded, OneTimeSecret } from "../ui.tsx";

export function NotificationsPage() {
  const { project, token } = useProject();
  const settings = useQuery(NotificationService.method.getNotifications, { project });
  const [secret, setSecret] = useState<string | null>(null);
  // NotFound is the answer while no URL is set, not a failure; after a removal it replaces the
  // settings still cached, so it is looked at first.
  const unset = settings.error && problemOf(settings.error).kind === "not-found";
  return (
    <>
      {secret && (
        <OneTimeSecret
          secret={secret}
          heading="The notification secret"
          testId="notification-secret"
          warning={
            <>
              Copy this secret now and give it to the receiver at the notification URL: it is shown
              only this once. Events carry webhook-id, webhook-timestamp and webhook-signature
              headers signed with it.
            </>
          }
          onDone={() => setSecret(null)}
          doneLabel="I have copied it"
        />
      )}
      {unset ? (
        <Settings current={undefined} onSecret={setSecret} />
      ) : (
        <Loaded query={settings} token={token}>
          {({ notifications }) => <Settings current={notifications} onSecret={setSecret} />}
        </Loaded>
      )}
    </>
  );
}

function Settings({
  current,
  onSecret,
}: {
  current: Notifications | undefined;
  onSecret: (secret: string | null) => void;
}) {
  const { project } = useProject();
  const invalidate = useInvalidate(NotificationService);
  const rotate = useMutation(NotificationService.method.rotateNotificationSecret, {
    onSuccess: async (answer) => {
      onSecret(answer.secret);
      await invalidate();
    },
  });
  const remove = useMutation(NotificationService.method.deleteNotifications, {
    onSuccess: async () => {
      // The secret on screen, if any, signs nothing any more.
      onSecret(null);
      await invalidate();
    },
  });
  const failed = rotate.error ?? remove.error;
  return (
    <section className="card narrow" aria-labelledby="where-events-go">
      <h2 id="where-events-go">Where events go</h2>
      <p className="hint">
        Relay posts its operational events here: target.circuit_opened, target.recovered,
        target.disabled and request.failed, signed the Standard Webhooks way with the project's
        notification secret.
      </p>
      {current ? (
        <p data-testid="notification-current">
          Events go to <code>{current.url}</code>, set since {formatTime(current.createdAt)}.
        </p>
      ) : (
        <p data-testid="notification-current">No notification URL is set: no event is sent.</p>
      )}
      <UrlForm key={current?.url ?? ""} current={current} onSecret={onSecret} />
      {current && (
        <p>
          <ConfirmButton
            label="Rotate secret"
            question="Make a new notification secret? The current one signs nothing from now on."
            confirmLabel="Yes, rotate it"
            disabled={rotate.isPending}
            onConfirm={() => rotate.mutate({ project })}
          />{" "}
          <ConfirmButton
            label="Remove notification URL"
            question="Remove the URL and its secret? No event is sent until a URL is set again."
            confirmLabel="Yes, remove it"
            disabled={remove.isPending}
            onConfirm={() => remove.mutate({ project })}
          />
        </p>
      )}
      <FormError problem={failed ? problemOf(failed) : null} />
    </section>
  );
}

/** Sets the URL; the first set makes the secret, a later one keeps it. */
function UrlForm({
  current,
  onSecret,
}: {
  current: Notifications | undefined;
  onSecret: (secret: string) => void;
}) {
  const { project } = useProject();
  const [url, setUrl] = useState(current?.url ?? "");
  const invalidate = useInvalidate(NotificationService);
  const set = useMutation(NotificationService.method.setNotifications, {
    onSuccess: async (answer) => {
      if (answer.secret) onSecret(answer.secret);
      await invalidate();
    },
  });
  const problem = set.error ? problemOf(set.error) : null;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    set.mutate({ project, url });
  };
  return (
    <form onSubmit={submit} noValidate>
      <Field
        label="Notification URL"
        hint="http or https; checked as a target URL is."
        error={fieldError(problem, "url")}
      >
        {(control) => (
          <input
            {...control}
            name="url"
            type="url"
            value={url}
            onChange={(e) => setUrl(e.target.value)}
          />
        )}
      </Field>
      <FormError problem={problem} />
      <button type="submit" disabled={set.isPending}>
        {current ? "Change URL" : "Set URL"}
      </button>
    </form>
  );
}
