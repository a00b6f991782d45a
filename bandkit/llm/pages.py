"""The turns page (`/`): each agent's requests as they come, refreshed from `/_stub/turns`;
and how the operator signs in to it.

The page is static; its script fetches the JSON and writes it with `textContent` only, so
no logged text is ever parsed as HTML. A strict CSP allows nothing but this origin.

Who may read it: the operator only, never "whoever is on loopback" (a box's credential
proxy is on loopback too). The page, its script and style, `/_stub/turns` and
`/_stub/health` take the operator key in `X-Bandkit-Operator-Key` (scripts: `invoke
llm.status`) or a session cookie from a one-time login link, as the emulator's pages do
(`bandkit.emulator.access.PageAccess`): `POST /_stub/login-link` with the operator key
mints `<URL>/login#token=...` (`invoke llm.up|status` print it); the token rides in the
fragment, which no browser sends, and `login.js` posts it in a form body for an HttpOnly,
SameSite=Strict cookie. Without either: 401.
"""

from __future__ import annotations

import json

from starlette.responses import Response

OPERATOR_HEADER = "x-bandkit-operator-key"
LOGIN_BODY_MAX = 4096
SIGN_IN_HELP = (
    "Open the login link printed by `uv run invoke llm.up` (`uv run invoke llm.status` "
    "prints a fresh one) or by `python -m bandkit.llm`. Each link works once."
)
LOGIN_CSP = (
    "default-src 'none'; script-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)

CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

INDEX = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>bandkit llm stub: turns</title>
<link rel="stylesheet" href="/_stub/page.css">
<script src="/_stub/page.js" defer></script>
</head><body>
<h1>bandkit llm stub</h1>
<p id="summary">loading...</p>
<div id="agents"></div>
</body></html>
"""

CSS = """body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin-bottom: 2em; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: 3px 8px; text-align: left;
         vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.err td { background: #fde8e8; }
code { white-space: pre-wrap; word-break: break-word; }
"""

SCRIPT = """'use strict';
const cols = ['seq', 'turn', 'at', 'api', 'stream', 'model', 'status', 'rule', 'in', 'out',
  'ms_first', 'ms_last'];
function cell(row, value, cls) {
  const td = document.createElement('td');
  if (cls) td.className = cls;
  const code = document.createElement('code');
  code.textContent = value === null || value === undefined ? '' : String(value);
  td.appendChild(code);
  row.appendChild(td);
}
function said(t) {
  const r = t.request || {};
  if (r.new_turn === false) return 'tool result ' + (r.last_tool || '') + ': ' +
    (r.last_tool_result || '');
  return r.message || '';
}
function answered(t) {
  if (t.error) return t.error;
  const r = t.reply || {};
  const parts = [];
  if (r.text) parts.push(r.text);
  if (r.tool) parts.push(r.tool + ' ' + JSON.stringify(r.arguments || {}));
  return parts.join(' | ');
}
async function refresh() {
  let data;
  try {
    data = await (await fetch('/_stub/turns')).json();
  } catch (e) {
    document.getElementById('summary').textContent = 'stub unreachable: ' + e;
    return;
  }
  const byAgent = {};
  for (const t of data.turns) (byAgent[t.agent || '(none)'] ||= []).push(t);
  const root = document.getElementById('agents');
  root.replaceChildren();
  for (const [agent, turns] of Object.entries(byAgent)) {
    const s = data.agents[agent] || {};
    const h = document.createElement('h2');
    h.textContent = agent + ': ' + turns.length + ' requests, p50 ' + s.p50_ms + ' ms';
    root.appendChild(h);
    const table = document.createElement('table');
    const head = document.createElement('tr');
    for (const c of cols) { const th = document.createElement('th'); th.textContent = c;
      head.appendChild(th); }
    table.appendChild(head);
    for (const t of turns.slice().reverse()) {
      const row = document.createElement('tr');
      if (t.status >= 400) row.className = 'err';
      const values = {...t, in: said(t), out: answered(t)};
      for (const c of cols) cell(row, values[c], c.startsWith('ms') ? 'num' : '');
      table.appendChild(row);
    }
    root.appendChild(table);
  }
  document.getElementById('summary').textContent = data.count + ' requests since start';
}
refresh();
setInterval(refresh, 2000);
"""


LOGIN = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>bandkit llm stub: sign in</title>
<script src="/_stub/login.js" defer></script>
</head><body>
<h1>bandkit llm stub</h1>
<p id="why">Signing in...</p>
<form id="login" method="post" action="/login"><input type="hidden" name="token"></form>
</body></html>
"""

# The token is in the fragment (never sent, so never in a request line or access log);
# this script moves it into a form body, drops it from the address bar and posts it.
LOGIN_SCRIPT = f"""'use strict';
const token = new URLSearchParams(location.hash.slice(1)).get('token');
history.replaceState(null, '', '/login');
if (token) {{
  const form = document.getElementById('login');
  form.elements.token.value = token;
  form.submit();
}} else {{
  document.getElementById('why').textContent = {json.dumps(SIGN_IN_HELP)};
}}
"""

NEEDS_LOGIN = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>bandkit llm stub: sign in</title>
</head><body>
<h1>Sign in with the login link</h1>
<p>{why}</p><p>{help}</p>
</body></html>
"""


def _page(body: str, media: str, *, status: int = 200, csp: str = CSP) -> Response:
    return Response(
        body,
        status_code=status,
        media_type=media,
        headers={
            "content-security-policy": csp,
            "x-content-type-options": "nosniff",
            "cache-control": "no-store",
            "referrer-policy": "no-referrer",
        },
    )


def login_page() -> Response:
    return _page(LOGIN, "text/html; charset=utf-8", csp=LOGIN_CSP)


def login_script() -> Response:
    return _page(LOGIN_SCRIPT, "text/javascript; charset=utf-8")


def needs_login(why: str) -> Response:
    """401: a page that says how to sign in (the reason and help are fixed text)."""
    body = NEEDS_LOGIN.format(why=why, help=SIGN_IN_HELP)
    return _page(body, "text/html; charset=utf-8", status=401)


def index() -> Response:
    return _page(INDEX, "text/html; charset=utf-8")


def script() -> Response:
    return _page(SCRIPT, "text/javascript; charset=utf-8")


def stylesheet() -> Response:
    return _page(CSS, "text/css; charset=utf-8")
