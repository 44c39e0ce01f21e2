/**
 * The codec endpoint's sign-in page (GET /codec): a plain form, no script, no style, nothing
 * from elsewhere, so its policy forbids all of that. An operator pastes a token once; the
 * session cookie it gets lets the Temporal UI, on the same site, call the endpoint.
 */

/** The page may only post its own forms. */
export const signInPagePolicy =
  "default-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`);

export function signInPage(state: { signedInUntil: Date | null; problem?: string }): string {
  const { signedInUntil, problem } = state;
  const status = signedInUntil
    ? `<p role="status">Signed in until ${escapeHtml(signedInUntil.toISOString())}. The Temporal UI on this site may now decode Relay's payloads (its Codec Server setting: this endpoint, with cross-origin credentials included).</p>
<form method="post" action="/codec/sign-out"><button type="submit">Sign out</button></form>`
    : "<p>Not signed in.</p>";
  return `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>Relay payload codec: sign in</title></head>
<body>
<h1>Relay payload codec</h1>
<p>Relay seals every payload it hands Temporal. Operators open them here for the Temporal UI: sign in with the admin token or the operator token (RELAY_OPERATOR_TOKEN). Member tokens are refused.</p>
${problem ? `<p role="alert">${escapeHtml(problem)}</p>` : ""}${status}
<form method="post" action="/codec/session">
<label>Token <input type="password" name="token" autocomplete="off" required></label>
<button type="submit">Sign in</button>
</form>
</body>
</html>
`;
}
