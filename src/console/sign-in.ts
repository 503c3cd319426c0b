import { escapeHtml } from '../graph/page.ts';

/**
 * The sign-in page of the orchestrator's console (session.ts, tokenSignIn): a form that posts a console
 * token, and no script. Its one message is fixed text of ours, never anything a caller sent.
 */

export function signInPage(message?: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Holt console: sign in</title>
<link rel="stylesheet" href="assets/app.css">
</head>
<body>
<header><h1>Holt console</h1></header>
<main>
<form method="post" action="sign-in" class="sign-in" aria-label="sign in">
<label for="token">Console token</label>
<input id="token" name="token" type="password" autocomplete="off" required autofocus>
<button type="submit">Sign in</button>
${message ? `<p class="error" role="alert">${escapeHtml(message)}</p>` : ''}
<p class="muted">A token of the Holt's <code>spec.ingress.console.tokens</code>: <code>kubectl get secret &lt;holt&gt;-console-&lt;name&gt; -o jsonpath='{.data.token}' | base64 -d</code></p>
</form>
</main>
</body>
</html>
`;
}
