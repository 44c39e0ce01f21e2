/**
 * API keys: the list with each key's state and lineage; minting, rotating, revoking and revealing
 * an auto-rotated successor. A plaintext is on screen once, until the member dismisses it.
 */
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { type FormEvent, useEffect, useRef, useState } from "react";
import { type ApiKey, KeyMode, KeyService, KeyStatus } from "../../../gen/relay/v1/keys_pb.ts";
import { fieldError, problemOf } from "../errors.ts";
import { formatTime, keyModeNames, keyStatusNames } from "../model.ts";
import { useInvalidate, useProject } from "../project.ts";
import {
  ConfirmButton,
  CopyButton,
  DaysField,
  Field,
  FormError,
  Loaded,
  StatusBadge,
} from "../ui.tsx";

interface Revealed {
  key: ApiKey;
  plaintext: string;
  how: string;
}

export function KeysPage() {
  const { project, token } = useProject();
  const keys = useQuery(KeyService.method.listKeys, { project });
  const [revealed, setRevealed] = useState<Revealed | null>(null);
  const invalidate = useInvalidate(KeyService);
  const show = (how: string) => async (answer: { key?: ApiKey; plaintext: string }) => {
    if (answer.key) setRevealed({ key: answer.key, plaintext: answer.plaintext, how });
    await invalidate();
  };
  const rotate = useMutation(KeyService.method.rotateKey, { onSuccess: show("rotated") });
  const reveal = useMutation(KeyService.method.revealSuccessor, { onSuccess: show("successor") });
  const revoke = useMutation(KeyService.method.revokeKey, { onSuccess: () => invalidate() });
  const failed = rotate.error ?? reveal.error ?? revoke.error;

  return (
    <>
      {revealed && <Plaintext revealed={revealed} onDone={() => setRevealed(null)} />}
      <MintForm onMinted={show("minted")} />
      <FormError problem={failed ? problemOf(failed) : null} />
      <Loaded query={keys} token={token}>
        {({ keys }) => {
          const names = new Map(keys.map((k) => [k.id, k.name]));
          const refer = (id: string | undefined) => (id ? `${names.get(id) ?? "?"} (${id})` : "—");
          return keys.length === 0 ? (
            <p>No keys yet.</p>
          ) : (
            <table>
              <caption className="visually-hidden">API keys</caption>
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Mode</th>
                  <th scope="col">Status</th>
                  <th scope="col">Expires</th>
                  <th scope="col">Created</th>
                  <th scope="col">Predecessor</th>
                  <th scope="col">Successor</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {keys.map((key) => {
                  const usable =
                    key.status === KeyStatus.ACTIVE || key.status === KeyStatus.EXPIRED_GRACE;
                  return (
                    <tr key={key.id} data-key-id={key.id}>
                      <th scope="row">{key.name}</th>
                      <td>{keyModeNames[key.mode]}</td>
                      <td>
                        <StatusBadge status={keyStatusNames[key.status]} />
                      </td>
                      <td>{formatTime(key.expiresAt, "never")}</td>
                      <td>{formatTime(key.createdAt)}</td>
                      <td>{refer(key.predecessorId)}</td>
                      <td>{refer(key.successorId)}</td>
                      <td className="actions">
                        {key.status === KeyStatus.ACTIVE && (
                          <button
                            type="button"
                            onClick={() => rotate.mutate({ project, keyId: key.id })}
                            aria-label={`Rotate ${key.name}`}
                          >
                            Rotate
                          </button>
                        )}
                        {key.successorId && usable && (
                          <button
                            type="button"
                            onClick={() => reveal.mutate({ project, keyId: key.id })}
                            aria-label={`Reveal the successor of ${key.name}`}
                          >
                            Reveal successor
                          </button>
                        )}
                        {key.status !== KeyStatus.REVOKED && (
                          <ConfirmButton
                            label={`Revoke ${key.name}`}
                            question={`Revoke ${key.name}? Calls with it fail at once, everywhere.`}
                            confirmLabel="Yes, revoke"
                            onConfirm={() => revoke.mutate({ project, keyId: key.id })}
                          />
                        )}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          );
        }}
      </Loaded>
    </>
  );
}

/** The one showing of a plaintext, focused so it is read out and can be copied at once. */
function Plaintext({ revealed, onDone }: { revealed: Revealed; onDone: () => void }) {
  const box = useRef<HTMLElement>(null);
  useEffect(() => box.current?.focus(), []);
  const what =
    revealed.how === "minted"
      ? "New key"
      : revealed.how === "rotated"
        ? "Successor"
        : "Revealed successor";
  return (
    <section className="plaintext" ref={box} tabIndex={-1} aria-labelledby="plaintext-heading">
      <h2 id="plaintext-heading">
        {what} “{revealed.key.name}” ({keyModeNames[revealed.key.mode]})
      </h2>
      <p className="warning">
        Copy this key now. It is shown only this once: Relay keeps only its hash and cannot show it
        again.
      </p>
      <p>
        <code data-testid="plaintext">{revealed.plaintext}</code>
      </p>
      <CopyButton text={revealed.plaintext} label="Copy key" />{" "}
      <button type="button" onClick={onDone}>
        I have copied it
      </button>
    </section>
  );
}

function MintForm({
  onMinted,
}: {
  onMinted: (answer: { key?: ApiKey; plaintext: string }) => void;
}) {
  const { project } = useProject();
  const [name, setName] = useState("");
  const [mode, setMode] = useState(KeyMode.LIVE);
  const [ttlDays, setTtlDays] = useState("");
  const mint = useMutation(KeyService.method.mintKey, {
    onSuccess: (answer) => {
      setName("");
      setTtlDays("");
      onMinted(answer);
    },
  });
  const [local, setLocal] = useState<string | null>(null);
  const problem = mint.error ? problemOf(mint.error) : null;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    const ttl = ttlDays.trim() === "" ? undefined : Number(ttlDays);
    if (ttl !== undefined && !Number.isInteger(ttl)) {
      setLocal("must be a whole number of days");
      return;
    }
    setLocal(null);
    mint.mutate({ project, name, mode, ...(ttl !== undefined && { ttlDays: ttl }) });
  };
  return (
    <form className="card" onSubmit={submit} aria-labelledby="mint" noValidate>
      <h2 id="mint">Mint a key</h2>
      <div className="row">
        <Field label="Name" error={fieldError(problem, "name")}>
          {(control) => (
            <input
              {...control}
              name="name"
              value={name}
              onChange={(e) => setName(e.target.value)}
            />
          )}
        </Field>
        <Field label="Mode" hint="Picks the credit pool." error={fieldError(problem, "mode")}>
          {(control) => (
            <select
              {...control}
              name="mode"
              value={mode}
              onChange={(e) => setMode(Number(e.target.value))}
            >
              <option value={KeyMode.LIVE}>live</option>
              <option value={KeyMode.TEST}>test</option>
            </select>
          )}
        </Field>
        <DaysField
          label="Lifetime (days)"
          hint="1 to 3650; empty: the policy's default."
          error={
            local ??
            fieldError(problem, "ttlDays") ??
            (problem?.code === "policy_violation" ? problem.message : undefined)
          }
          name="ttlDays"
          value={ttlDays}
          onChange={setTtlDays}
        />
      </div>
      <FormError problem={problem?.code === "policy_violation" ? null : problem} />
      <button type="submit" disabled={mint.isPending}>
        Mint key
      </button>
    </form>
  );
}
