"""The room pages: `/` lists rooms, `/rooms/{id}` is a room's live chat; `/login` signs in.

Pages, feeds and the page's API calls need the user (`access.py`): a session cookie
from a one-time login link (`/login#token=...[&next=/rooms/<id>]`, printed by the
emulator, by `invoke platform.up|status` and by `invoke demo.up`), or the user key in
`X-API-Key` (scripts). Without either, a page answers 401 with a "use the login link"
page and a feed answers 401 JSON.

Each page opens a Server-Sent Events feed: `/rooms/{id}/feed` first sends a `snapshot`
(room, participants, messages and events so far), then every change as it happens, so
the transcript updates without reload. `/feed` carries room additions and removals.
Feeds are limited per client and in total (429 beyond). The room page posts as the
user through the human API (`POST /api/v1/me/chats/{id}/messages`), completes `@`
mentions of the room's agents, and adds the user's other agents as members.
"""

from __future__ import annotations

import html
import json
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from bandkit.emulator import messages, wire
from bandkit.emulator.access import HOME_PAGE, USER_KEY_CLIENT, landing
from bandkit.emulator.api import error_response, platform_of
from bandkit.emulator.channels import PAGE_ALL, Kind

ROOM_HTML = resources.files("bandkit.emulator").joinpath("static/room.html").read_text("utf-8")
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
# Every page: never framed (clickjacking the composer), never cached, no referrer.
PAGE_HEADERS = {
    "content-security-policy": "frame-ancestors 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
LOGIN_BODY_MAX = 4096
FEED_RETRY_AFTER_S = 5

STYLE = """<style>
body{font:15px/1.5 system-ui,sans-serif;margin:24px;color:#1d2330}
li{margin:4px 0} .muted{color:#6a7285} code{background:#eef1f6;padding:0 4px}</style>"""

INDEX = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Band emulator</title>{style}</head><body>
<h1>Band emulator</h1><p class="muted">{summary}</p><ul id="rooms">{items}</ul>
<script>
"use strict";
const feed = new EventSource("/feed");
feed.onmessage = () => location.reload();
</script></body></html>"""

SIGN_IN_HELP = (
    "Open the login link printed by <code>uv run invoke platform.up</code> "
    "(<code>uv run invoke platform.status</code> prints a fresh one) or by "
    "<code>python -m bandkit.emulator</code>. Each link works once."
)

NEEDS_LOGIN = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Band emulator · sign in</title>{style}</head><body>
<h1>Sign in with the login link</h1><p id="why">{why}</p><p>{help}</p></body></html>"""

# The token is in the fragment (never sent, so never in a request line or access log);
# this page moves it (and the page to land on, `next`) into a form body, drops it from
# the address bar and posts it. The server lands only on `access.landing` pages.
LOGIN = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Band emulator · signing in</title>{style}</head><body>
<h1>Band emulator</h1><p id="why">Signing in…</p>
<form id="login" method="post" action="/login"><input type="hidden" name="token">
<input type="hidden" name="next"></form>
<script>
"use strict";
const given = new URLSearchParams(location.hash.slice(1));
const token = given.get("token");
history.replaceState(null, "", "/login");
if (token) {{
  const form = document.getElementById("login");
  form.elements.token.value = token;
  form.elements.next.value = given.get("next") || "/";
  form.submit();
}} else {{
  document.getElementById("why").innerHTML = {help};
}}
</script></body></html>"""


def _html(text: str, status: int = 200, headers: dict[str, str] | None = None) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers={**PAGE_HEADERS, **(headers or {})})


def _needs_login(why: str) -> HTMLResponse:
    return _html(NEEDS_LOGIN.format(style=STYLE, why=why, help=SIGN_IN_HELP), status=401)


def page_client(request: Request) -> str | None:
    """Who is asking, for the limits: a live session's id, `user-key`, or None (refuse)."""
    platform = platform_of(request)
    key = request.headers.get("x-api-key")
    if key:
        principal = platform.authenticate(key)
        return USER_KEY_CLIENT if principal is not None and principal.kind is Kind.USER else None
    return platform.pages.session_of(request)


def _feed_client(request: Request) -> str | None:
    """`page_client`, and a cookie-carrying feed must be opened by our own page."""
    client = page_client(request)
    cross = request.headers.get("sec-fetch-site", "same-origin") != "same-origin"
    return None if cross and client != USER_KEY_CLIENT else client


async def login_page(request: Request) -> Response:
    return _html(LOGIN.format(style=STYLE, help=json.dumps(SIGN_IN_HELP)))


async def login(request: Request) -> Response:
    """Trade a one-time token (form body) for a session cookie, then go to the rooms, or
    to the one room the link names (`next`, only a page `access.landing` allows)."""
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > LOGIN_BODY_MAX:
            return error_response(413, "payload_too_large", "login body too large")
    form = parse_qs(raw.decode("utf-8", errors="replace"))
    token = form.get("token", [""])[0]
    lands = landing(form.get("next", [HOME_PAGE])[0]) or HOME_PAGE
    pages = platform_of(request).pages
    session = pages.redeem(token)
    if session is None:
        return _needs_login("This login link was already used, has expired, or is not valid.")
    response = RedirectResponse(lands, status_code=303, headers=PAGE_HEADERS)
    response.headers.append("set-cookie", pages.cookie_header(session))
    return response


async def index(request: Request) -> Response:
    if page_client(request) is None:
        return _needs_login("The room pages need you to sign in.")
    state = platform_of(request).state
    items = "".join(
        f'<li><a href="/rooms/{html.escape(r.id)}">{html.escape(r.title or r.id)}</a> '
        f'<span class="muted">{len(r.participants)} participants, '
        f"{len(state.room_messages.get(r.id, []))} messages</span></li>"
        for r in state.rooms.values()
    )
    summary = f"{len(state.rooms)} rooms, {len(state.agents)} agents. Open a room to chat."
    return _html(
        INDEX.format(style=STYLE, summary=summary, items=items or "<li>No rooms yet.</li>")
    )


async def room_page(request: Request) -> Response:
    if page_client(request) is None:
        return _needs_login("The room pages need you to sign in.")
    if request.path_params["room_id"] not in platform_of(request).state.rooms:
        return error_response(404, "not_found", "chat room not found")
    return _html(ROOM_HTML)


def _sse(line: str) -> str:
    return f"data: {line}\n\n"


class _Feed(StreamingResponse):
    """A feed that gives back its slot and page subscription however it ends (even
    when the client is gone before the first byte, so the stream never starts)."""

    def __init__(self, content: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream", headers=SSE_HEADERS)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _open_feed(request: Request, key: str, first: str) -> Response:
    """Authenticate, take a slot, subscribe to page key `key`; stream `first`, then changes."""
    platform = platform_of(request)
    client = _feed_client(request)
    if client is None:
        return error_response(401, "unauthorized", "sign in with the login link first")
    if not platform.pages.open_feed(client):
        response = error_response(
            429, "too_many_requests", "too many open feeds; close some pages and retry"
        )
        response.headers["retry-after"] = str(FEED_RETRY_AFTER_S)
        return response
    queue = platform.broker.subscribe_page(key)

    def release() -> None:
        platform.broker.unsubscribe_page(key, queue)
        platform.pages.close_feed(client)

    async def stream() -> AsyncIterator[str]:
        yield first
        while (line := await queue.get()) is not None:
            yield _sse(line)

    return _Feed(stream(), release)


async def room_feed(request: Request) -> Response:
    platform = platform_of(request)
    room_id = request.path_params["room_id"]
    if _feed_client(request) is None:
        return error_response(401, "unauthorized", "sign in with the login link first")
    room = platform.state.rooms.get(room_id)
    if room is None:
        return error_response(404, "not_found", "chat room not found")
    state = platform.state
    snapshot: dict[str, Any] = {
        "room": wire.room(room),
        "participants": [wire.participant(state, p) for p in room.participants.values()],
        "messages": [wire.message(m) for m in messages.room_messages(state, room_id)],
    }
    first = _sse(json.dumps({"event": "snapshot", "payload": snapshot}))
    return _open_feed(request, room_id, first)


async def index_feed(request: Request) -> Response:
    return _open_feed(request, PAGE_ALL, ": live\n\n")


ROUTES = [
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/", index, methods=["GET"]),
    Route("/feed", index_feed, methods=["GET"]),
    Route("/rooms/{room_id}", room_page, methods=["GET"]),
    Route("/rooms/{room_id}/feed", room_feed, methods=["GET"]),
]
