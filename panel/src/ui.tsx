/** The pieces every page is built from: labelled fields with their errors, states, copy. */
import type { UseQueryResult } from "@tanstack/react-query";
import { type FormEvent, type ReactNode, useEffect, useId, useRef, useState } from "react";
import { type Problem, problemOf } from "./errors.ts";
import { signOut } from "./session.ts";

/** What a field's control needs to be announced with its label, hint and error. */
export interface ControlProps {
  id: string;
  "aria-invalid": boolean;
  "aria-describedby": string | undefined;
}

/**
 * A label, a control, an optional hint and the API's error about it. The error is tied to the
 * control (aria-describedby, aria-invalid) and announced as it appears (aria-live).
 */
export function Field({
  label,
  hint,
  error,
  children,
}: {
  label: ReactNode;
  hint?: ReactNode;
  error?: string | undefined;
  children: (control: ControlProps) => ReactNode;
}) {
  const id = useId();
  const described = [hint && `${id}-hint`, error && `${id}-error`].filter(Boolean).join(" ");
  return (
    <div className={error ? "field field-invalid" : "field"}>
      <label htmlFor={id}>{label}</label>
      {children({ id, "aria-invalid": Boolean(error), "aria-describedby": described || undefined })}
      {hint && (
        <p className="hint" id={`${id}-hint`}>
          {hint}
        </p>
      )}
      <p className="field-error" id={`${id}-error`} aria-live="polite">
        {error}
      </p>
    </div>
  );
}

/** Code typed to try: monospace, growing with its text up to `maxRows`. */
export function CodeArea({
  control,
  name,
  text,
  onText,
  maxRows,
}: {
  control: ControlProps;
  name: string;
  text: string;
  onText: (text: string) => void;
  maxRows: number;
}) {
  return (
    <textarea
      {...control}
      name={name}
      className="code"
      rows={Math.min(maxRows, Math.max(3, text.split("\n").length + 1))}
      spellCheck={false}
      value={text}
      onChange={(e) => onText(e.target.value)}
    />
  );
}

/** A key lifetime in whole days, 1 to 3650; empty means what the hint says. */
export function DaysField(props: {
  label: string;
  hint: string;
  error: string | undefined;
  name: string;
  value: string;
  onChange: (value: string) => void;
}) {
  return (
    <Field label={props.label} hint={props.hint} error={props.error}>
      {(control) => (
        <input
          {...control}
          name={props.name}
          type="number"
          min={1}
          max={3650}
          value={props.value}
          onChange={(e) => props.onChange(e.target.value)}
        />
      )}
    </Field>
  );
}

/**
 * A form's outcome when a call failed, read out at once: the API's message, or, when it named
 * fields, a pointer to the messages next to them.
 */
export function FormError({ problem }: { problem: Problem | null }) {
  return (
    <div className="form-error" role="alert">
      {problem && (
        <p>
          {Object.keys(problem.fields).length > 0
            ? "Not saved: see the messages next to the fields."
            : problem.message}
        </p>
      )}
    </div>
  );
}

/** A failed load, said plainly with what to do next; never a blank page. */
export function ProblemNotice({
  problem,
  token,
  retry,
}: {
  problem: Problem;
  token?: string | undefined;
  retry?: (() => void) | undefined;
}) {
  const headings: Record<Problem["kind"], string> = {
    "signed-out": "Your token is no longer accepted",
    offline: "The control plane cannot be reached",
    forbidden: "Not allowed",
    "not-found": "Not found",
    invalid: "The request was refused",
    failed: "Something went wrong",
  };
  return (
    <section className={`notice notice-${problem.kind}`} role="alert">
      <h2>{headings[problem.kind]}</h2>
      <p>
        {problem.kind === "signed-out"
          ? "The member token was refused (it may have been removed, rotated or expired). Sign in again with a current token."
          : problem.message}
      </p>
      {problem.kind === "signed-out" && token && (
        <button type="button" onClick={() => signOut(token)}>
          Forget this token and sign in again
        </button>
      )}
      {retry && problem.kind !== "signed-out" && (
        <button type="button" onClick={retry}>
          Try again
        </button>
      )}
    </section>
  );
}

/** A query's loading and failure states around what its data shows. */
export function Loaded<T>({
  query,
  token,
  children,
}: {
  query: UseQueryResult<T>;
  token?: string | undefined;
  children: (data: T) => ReactNode;
}) {
  if (query.data !== undefined) {
    return (
      <>
        {query.error && (
          <ProblemNotice
            problem={problemOf(query.error)}
            token={token}
            retry={() => query.refetch()}
          />
        )}
        {children(query.data)}
      </>
    );
  }
  if (query.error) {
    return (
      <ProblemNotice problem={problemOf(query.error)} token={token} retry={() => query.refetch()} />
    );
  }
  return (
    <p className="loading" role="status">
      Loading…
    </p>
  );
}

/** Copies `text`, saying so; where the clipboard is refused, says to copy by hand. */
export function CopyButton({ text, label = "Copy" }: { text: string; label?: string }) {
  const [state, setState] = useState<"idle" | "copied" | "failed">("idle");
  const copy = () =>
    navigator.clipboard.writeText(text).then(
      () => setState("copied"),
      () => setState("failed"),
    );
  return (
    <span className="copy">
      <button type="button" onClick={copy}>
        {label}
      </button>
      <span role="status" className="copy-state">
        {state === "copied"
          ? "Copied."
          : state === "failed"
            ? "Copy failed: select the text and copy it."
            : ""}
      </span>
    </span>
  );
}

/**
 * A secret's one showing, focused so it is read out and can be copied at once: the API answers
 * it only in this call and Relay keeps it only sealed or hashed. `warning` says what it is for.
 */
export function OneTimeSecret(props: {
  secret: string;
  heading: string;
  warning: ReactNode;
  testId: string;
  onDone: () => void;
  doneLabel: string;
}) {
  const id = useId();
  const box = useRef<HTMLElement>(null);
  useEffect(() => box.current?.focus(), []);
  return (
    <section className="plaintext" ref={box} tabIndex={-1} aria-labelledby={id}>
      <h2 id={id}>{props.heading}</h2>
      <p className="warning">{props.warning}</p>
      <p>
        <code data-testid={props.testId}>{props.secret}</code>
      </p>
      <CopyButton text={props.secret} label="Copy secret" />{" "}
      <button type="button" onClick={props.onDone}>
        {props.doneLabel}
      </button>
    </section>
  );
}

/**
 * A destructive action asked twice: the first press shows the question and moves focus to the
 * confirming button, so keyboard users land on the choice.
 */
export function ConfirmButton({
  label,
  question,
  confirmLabel,
  onConfirm,
  disabled,
}: {
  label: string;
  question: string;
  confirmLabel: string;
  onConfirm: () => void;
  disabled?: boolean;
}) {
  const [asking, setAsking] = useState(false);
  const confirm = useRef<HTMLButtonElement>(null);
  useEffect(() => {
    if (asking) confirm.current?.focus();
  }, [asking]);
  if (!asking) {
    return (
      <button type="button" className="danger" disabled={disabled} onClick={() => setAsking(true)}>
        {label}
      </button>
    );
  }
  return (
    <fieldset className="confirm">
      <legend>{question}</legend>
      <button
        type="button"
        className="danger"
        ref={confirm}
        onClick={() => {
          setAsking(false);
          onConfirm();
        }}
      >
        {confirmLabel}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </fieldset>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span className={`badge badge-${status.replace(/\s+/g, "-")}`}>{status}</span>;
}

/**
 * A setting owners change and editors see read-only: its note (the editor's says why), its
 * fields, and for owners the save's outcome and button.
 */
export function OwnersForm(props: {
  id: string;
  readOnly: boolean;
  readOnlyNote: string;
  note: string;
  legend: string;
  onSubmit: (event: FormEvent) => void;
  problem: Problem | null;
  saved: boolean;
  saving: boolean;
  submitLabel: string;
  children: ReactNode;
}) {
  const { readOnly } = props;
  return (
    <form
      className="card narrow"
      onSubmit={props.onSubmit}
      noValidate
      aria-describedby={`${props.id}-note`}
    >
      <p
        id={`${props.id}-note`}
        className={readOnly ? "notice" : "hint"}
        role={readOnly ? "note" : undefined}
      >
        {readOnly ? props.readOnlyNote : props.note}
      </p>
      <fieldset disabled={readOnly}>
        <legend>{props.legend}</legend>
        {props.children}
      </fieldset>
      {!readOnly && (
        <>
          <FormError problem={props.problem} />
          {props.saved && (
            <p role="status" className="saved">
              Saved.
            </p>
          )}
          <button type="submit" disabled={props.saving}>
            {props.submitLabel}
          </button>
        </>
      )}
    </form>
  );
}
