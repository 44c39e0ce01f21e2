/**
 * Sign-in with a member token, and the projects signed in so far. Adding another project's
 * token adds that project; each token is kept only in this browser.
 */
import { type FormEvent, useState } from "react";
import { fieldError, type Problem, problemOf } from "../errors.ts";
import { projectPath } from "../project.ts";
import { Link, navigate } from "../router.tsx";
import { signIn, signOut, useMemberships } from "../session.ts";
import { Field, FormError } from "../ui.tsx";

export function SignInPage({ unknownProject }: { unknownProject?: string }) {
  const memberships = useMemberships();
  const [token, setToken] = useState("");
  const [remember, setRemember] = useState(false);
  const [problem, setProblem] = useState<Problem | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setProblem(null);
    try {
      const added = await signIn(token.trim(), remember);
      setToken("");
      const [first] = added;
      if (added.length === 1 && first) navigate(projectPath(first.project));
    } catch (error) {
      setProblem(problemOf(error));
    } finally {
      setBusy(false);
    }
  };

  // Refusals of the token itself belong next to the token field.
  const tokenError =
    problem && (problem.kind === "signed-out" || problem.kind === "forbidden")
      ? `This token was not accepted: ${problem.message}`
      : fieldError(problem, "token");

  return (
    <>
      {unknownProject && (
        <p className="notice" role="status">
          You are not signed in to project “{unknownProject}”. Sign in with one of its member
          tokens.
        </p>
      )}
      {memberships.length > 0 && (
        <section aria-labelledby="signed-in">
          <h2 id="signed-in">Your projects</h2>
          <ul className="projects">
            {memberships.map((m) => (
              <li key={m.project}>
                <Link to={projectPath(m.project)}>
                  {m.projectName} <span className="muted">({m.project})</span>
                </Link>{" "}
                <span className="muted">
                  {m.memberName}, {m.role}
                </span>{" "}
                <button type="button" className="link" onClick={() => signOut(m.token)}>
                  Forget token
                </button>
              </li>
            ))}
          </ul>
        </section>
      )}
      <form onSubmit={submit} className="card narrow" aria-labelledby="sign-in-heading" noValidate>
        <h2 id="sign-in-heading">{memberships.length > 0 ? "Add another project" : "Sign in"}</h2>
        <p>
          Paste a member token (<code>rmt_…</code>). A project's owner gets one when the project is
          created and can add members; each token belongs to one project.
        </p>
        <Field label="Member token" error={tokenError}>
          {(control) => (
            <input
              {...control}
              name="token"
              type="password"
              autoComplete="off"
              spellCheck={false}
              required
              value={token}
              onChange={(e) => setToken(e.target.value)}
            />
          )}
        </Field>
        <div className="checkbox">
          <input
            id="remember"
            type="checkbox"
            checked={remember}
            onChange={(e) => setRemember(e.target.checked)}
          />
          <label htmlFor="remember">
            Keep me signed in on this browser (otherwise: this tab only)
          </label>
        </div>
        {problem && !tokenError && <FormError problem={problem} />}
        <button type="submit" disabled={busy || token.trim() === ""}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </>
  );
}
