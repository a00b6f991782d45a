"""Who may reach the emulator: the Host guard, page logins and sessions, feed limits.

- **Host guard** (ASGI middleware around the whole app, WebSocket upgrades included): a
  request whose `Host` is not a name the emulator is reached by answers 421. The names
  are the bound host, `127.0.0.1`, `localhost` and `[::1]`, the `--tls-name`s and the
  `--allow-host`s, each with the port. A DNS-rebinding page (its own name resolving to
  127.0.0.1) sends its own name, so it gets nothing. Agents in containers reach the
  emulator as 127.0.0.1 (the docker runtime uses the host network and the credential
  proxy rewrites `Host` to its upstream); a bridge network's name needs `--allow-host`.
- **Page login**: pages, feeds and the page's API calls need the user. The user key never
  goes in a URL: the emulator mints one-time login tokens (its banner, and
  `POST /_emulator/login-link` with the user key, which `invoke platform.up|status` call)
  and the link is `<REST>/login#token=...`. A fragment is never sent by a browser, so no
  request line, and no access log, carries the token; the login page posts it in a form
  body. A valid unused token becomes a session: a random cookie (HttpOnly,
  SameSite=Strict, Secure under TLS, named after the port), kept only as a digest, in
  memory (a restart needs a new link). Tokens last `LOGIN_TTL_S`, sessions `SESSION_TTL_S`.
  A link may name the page it lands on (`#token=...&next=/rooms/<id>`, from
  `POST /_emulator/login-link?next=...`): only `/` or one room's page (`landing`), a
  relative path on this origin, so a link can never send the browser anywhere else.
- **Page calls to the human API** with the cookie must carry `X-Bandkit-Page: 1` (a
  custom header, so another origin's script would need a CORS preflight the emulator
  never grants; a form cannot set it) and must not be cross-origin by `Sec-Fetch-Site`.
- **Feeds** (SSE): at most `feeds_per_client` open per session (or per user key) and
  `feeds_total` in all; 429 beyond.

Cookies are not port-scoped: a browser sends the session cookie to every server on the
same host name, so another local web server a person visits could read it. Serve with
`--tls` to make it Secure-only.
"""

from __future__ import annotations

import hmac
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.requests import HTTPConnection
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from bandkit.emulator.state import key_digest

LOGIN_TTL_S = 30 * 60.0
SESSION_TTL_S = 12 * 3600.0
MAX_LOGIN_TOKENS = 32  # outstanding; minting more drops the oldest
MAX_SESSIONS = 64
PAGE_HEADER = "x-bandkit-page"
USER_KEY_CLIENT = "user-key"  # the feed-limit client id of requests made with the user key
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
HOME_PAGE = "/"
# Where a login may land: the room list or one room's page, nothing else (no scheme, no
# host, no `//`, no backslash, no dot segment, no query): never an open redirect.
LANDING = re.compile(r"/(?:rooms/[A-Za-z0-9_-]{1,64})?")

Clock = Callable[[], float]


def _split(raw: str) -> tuple[str, int | None]:
    """(`Host`-style name, port or None) of a host as given: `name`, `name:port`, an IP,
    `[v6]`, `[v6]:port`; a wildcard bind is reached as loopback."""
    raw = raw.strip().lower()
    if raw in ("0.0.0.0", ""):  # noqa: S104 - not binding: the wildcard is reached as loopback
        return "127.0.0.1", None
    if raw == "::":
        return "[::1]", None
    if raw.count(":") > 1 and not raw.startswith("["):
        return f"[{raw}]", None  # a bare IPv6 address
    parts = urlsplit(f"//{raw}")
    name = raw.rsplit(":", 1)[0] if parts.port is not None else raw
    return name, parts.port


def allowed_hosts(
    bound: str, port: int, *, tls: bool, extra: tuple[str, ...] = ()
) -> frozenset[str]:
    """Every `Host` value the emulator answers: name:port for each name it is reached by
    (an extra given as name:port keeps its own port), and the bare name too when the port
    is the scheme's default."""
    out: set[str] = set()
    default_port = 443 if tls else 80
    for raw in (bound, *LOOPBACK_NAMES, *extra):
        name, own_port = _split(raw)
        reached = own_port or port
        out.add(f"{name}:{reached}")
        if reached == default_port:
            out.add(name)
    return frozenset(out)


def landing(raw: str | None) -> str | None:
    """`raw` when it is a page a login may land on (`/`, `/rooms/<id>`), else None."""
    if raw is None or LANDING.fullmatch(raw) is None:
        return None
    return raw


class HostGuard:
    """Refuse any HTTP request or WebSocket upgrade with a foreign `Host` (`refusal`, a 421)."""

    def __init__(
        self,
        app: ASGIApp,
        allowed: Callable[[], frozenset[str]],
        refusal: Callable[[], Response],
    ) -> None:
        self.app = app
        self.allowed = allowed
        self.refusal = refusal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = Headers(scope=scope).get("host", "").strip().lower()
            if host not in self.allowed():
                response = self.refusal()
                if scope["type"] == "http":
                    await response(scope, receive, send)
                elif "websocket.http.response" in scope.get("extensions", {}):
                    await WebSocket(scope, receive, send).send_denial_response(response)
                else:
                    await send({"type": "websocket.close", "code": 1008, "reason": "bad host"})
                return
        await self.app(scope, receive, send)


@dataclass
class _Grant:
    digest: str
    expires: float


def _take(grants: list[_Grant], value: str, now: float) -> _Grant | None:
    """The live grant whose digest is `value`'s (constant time per entry); drops expired."""
    grants[:] = [g for g in grants if g.expires > now]
    digest = key_digest(value)
    found = None
    for grant in grants:
        if hmac.compare_digest(grant.digest, digest):
            found = grant
    return found


class PageAccess:
    """One-time login tokens, page sessions and open-feed counts (all in memory)."""

    def __init__(
        self,
        *,
        feeds_per_client: int = 8,
        feeds_total: int = 32,
        login_ttl: float = LOGIN_TTL_S,
        session_ttl: float = SESSION_TTL_S,
        clock: Clock = time.monotonic,
    ) -> None:
        self.feeds_per_client = feeds_per_client
        self.feeds_total = feeds_total
        self.login_ttl = login_ttl
        self.session_ttl = session_ttl
        self.clock = clock
        self.cookie_name = "band_emulator_session"  # the server adds its port
        self.secure = False  # Secure cookies (set under TLS)
        self.allowed: frozenset[str] = frozenset()  # Host values; set once bound
        self._tokens: list[_Grant] = []
        self._sessions: list[_Grant] = []
        self._feeds: dict[str, int] = {}

    # --- login and sessions ---------------------------------------------------------------

    def mint_login_token(self) -> str:
        token = secrets.token_urlsafe(32)
        self._tokens.append(_Grant(key_digest(token), self.clock() + self.login_ttl))
        del self._tokens[:-MAX_LOGIN_TOKENS]
        return token

    def redeem(self, token: str) -> str | None:
        """A new session id for an unused, unexpired login token (used up here), else None."""
        grant = _take(self._tokens, token, self.clock()) if token else None
        if grant is None:
            return None
        self._tokens.remove(grant)
        session = secrets.token_urlsafe(32)
        self._sessions.append(_Grant(key_digest(session), self.clock() + self.session_ttl))
        del self._sessions[:-MAX_SESSIONS]
        return session

    def session_of(self, conn: HTTPConnection) -> str | None:
        """The client id (session digest) of a request with a live session cookie."""
        cookie = conn.cookies.get(self.cookie_name)
        if not cookie:
            return None
        grant = _take(self._sessions, cookie, self.clock())
        return None if grant is None else grant.digest

    def cookie_header(self, session: str) -> str:
        secure = "; Secure" if self.secure else ""
        max_age = int(self.session_ttl)
        return (
            f"{self.cookie_name}={session}; Path=/; Max-Age={max_age}; HttpOnly; "
            f"SameSite=Strict{secure}"
        )

    def page_call_ok(self, conn: HTTPConnection) -> bool:
        """A cookie-authenticated API call comes from our own page (see the module doc)."""
        headers = conn.headers
        if headers.get(PAGE_HEADER) != "1":
            return False
        if headers.get("sec-fetch-site", "same-origin") != "same-origin":
            return False
        origin = headers.get("origin")
        return origin is None or (urlsplit(origin).netloc.lower() in self.allowed)

    # --- feed limits ----------------------------------------------------------------------

    def open_feed(self, client: str) -> bool:
        """Count one more open feed for `client`; False (and nothing counted) if over a limit."""
        if sum(self._feeds.values()) >= self.feeds_total:
            return False
        if self._feeds.get(client, 0) >= self.feeds_per_client:
            return False
        self._feeds[client] = self._feeds.get(client, 0) + 1
        return True

    def close_feed(self, client: str) -> None:
        left = self._feeds.get(client, 0) - 1
        if left > 0:
            self._feeds[client] = left
        else:
            self._feeds.pop(client, None)

    @property
    def open_feeds(self) -> int:
        return sum(self._feeds.values())
