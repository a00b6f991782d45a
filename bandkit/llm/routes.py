"""The ASGI app: the wire API routes, the stub's own operator-only pages, `build_app`.

The model endpoints hand over to `pipeline.answer`; `count_tokens` and `models` answer
directly. `/_stub/health`, `/_stub/turns` and the page (`pages`) answer the operator only:
the operator key in `X-Bandkit-Operator-Key` or a page session from a one-time login link
(`POST /_stub/login-link` with the key; `/login`), and only under a local `Host` (no DNS
rebinding). Being on loopback proves nothing: every box's credential proxy is. Unknown
URLs and internal errors are answered in the provider's error shape (`refusals`).
"""

from __future__ import annotations

import hmac
import logging
import time
from urllib.parse import parse_qs, urlsplit

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bandkit.llm import anthropic, openai_common, pages
from bandkit.llm.conversation import BadRequest
from bandkit.llm.pipeline import CHAT, MESSAGES, RESPONSES, answer, authenticate, json_body
from bandkit.llm.refusals import Refusal, error_reply, json_reply, provider_of
from bandkit.llm.state import Stub, stub_of

log = logging.getLogger("bandkit.llm")

LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")


async def messages(request: Request) -> Response:
    return await answer(request, MESSAGES)


async def responses(request: Request) -> Response:
    return await answer(request, RESPONSES)


async def chat_completions(request: Request) -> Response:
    return await answer(request, CHAT)


async def count_tokens(request: Request) -> Response:
    stub = stub_of(request)
    entry = stub.begin(request, "anthropic.count_tokens", "anthropic")
    try:
        body, size = await json_body(request, stub.config.max_body)
        entry.body = body
        authenticate(stub, entry, request)
        try:
            conv = anthropic.conversation(body, count_only=True)
        except BadRequest as exc:
            raise Refusal(400, exc.message, param=exc.param, tag="BAD_INPUT") from None
    except Refusal as refusal:
        return error_reply(stub, entry, refusal)
    entry.model, entry.status = conv.model, 200
    tokens = max(1, size // 4)
    return json_reply(stub, entry, {"input_tokens": tokens}, 200, {"request-id": entry.request_id})


async def models(request: Request) -> Response:
    stub = stub_of(request)
    provider = provider_of(request)
    entry = stub.begin(request, f"{provider}.models", provider)
    try:
        authenticate(stub, entry, request)
    except Refusal as refusal:
        return error_reply(stub, entry, refusal)
    entry.status = 200
    names = stub.scripts.model_names()
    if provider == "anthropic":
        return json_reply(
            stub, entry, anthropic.models_page(names), 200, {"request-id": entry.request_id}
        )
    return json_reply(
        stub, entry, openai_common.models_page(names), 200, {"x-request-id": entry.request_id}
    )


# --- the stub's own pages and control routes (the operator only) -------------------------


def _foreign_host(request: Request) -> Response | None:
    """403 unless the `Host` the client named is this machine (no rebinding)."""
    named = (urlsplit(f"//{request.headers.get('host', '')}").hostname or "").lower()
    if named not in LOCAL_NAMES:
        return JSONResponse(
            {"error": {"message": "the stub's pages answer a local Host name only"}},
            status_code=403,
        )
    return None


def _operator_key(request: Request) -> bool:
    presented = request.headers.get(pages.OPERATOR_HEADER, "")
    expected = stub_of(request).operator_key
    return bool(presented) and hmac.compare_digest(presented.encode(), expected.encode())


def _operator_only(request: Request, *, page: bool = False) -> Response | None:
    """None for the operator (key header or page session); else a refusal: 403 for a
    foreign Host, 401 otherwise (a sign-in page for `page`)."""
    if (refused := _foreign_host(request)) is not None:
        return refused
    if _operator_key(request) or stub_of(request).pages.session_of(request) is not None:
        return None
    if page:
        return pages.needs_login("The turns page needs you to sign in.")
    return JSONResponse(
        {"error": {"message": "the operator key or a login link's session is required"}},
        status_code=401,
    )


async def login_link(request: Request) -> Response:
    """A fresh one-time login link for the pages; the operator key only (no cookie)."""
    if (refused := _foreign_host(request)) is not None:
        return refused
    if not _operator_key(request):
        return JSONResponse({"error": {"message": "the operator key is required"}}, 401)
    access = stub_of(request).pages
    base = str(request.base_url).rstrip("/")
    url = f"{base}/login#token={access.mint_login_token()}"
    return JSONResponse({"url": url, "expires_in": int(access.login_ttl)}, status_code=201)


async def login_page(request: Request) -> Response:
    return _foreign_host(request) or pages.login_page()


async def login_script(request: Request) -> Response:
    return _foreign_host(request) or pages.login_script()


async def login(request: Request) -> Response:
    """Trade a one-time token (form body) for a session cookie, then go to the turns."""
    if (refused := _foreign_host(request)) is not None:
        return refused
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > pages.LOGIN_BODY_MAX:
            return JSONResponse({"error": {"message": "login body too large"}}, 413)
    token = parse_qs(raw.decode("utf-8", errors="replace")).get("token", [""])[0]
    access = stub_of(request).pages
    session = access.redeem(token)
    if session is None:
        return pages.needs_login("This login link was already used, has expired, or is not valid.")
    response = RedirectResponse("/", status_code=303, headers={"cache-control": "no-store"})
    response.headers.append("set-cookie", access.cookie_header(session))
    return response


async def health(request: Request) -> Response:
    if (refused := _operator_only(request)) is not None:
        return refused
    stub = stub_of(request)
    return JSONResponse(
        {
            "status": "ok",
            "agents": list(stub.scripts.agents),
            "models": stub.scripts.model_names(),
            "requests": stub.journal.count,
            "providers": sorted(stub.keys.keys),
            "uptime_s": round(time.time() - stub.started, 1),
        }
    )


async def turns(request: Request) -> Response:
    if (refused := _operator_only(request)) is not None:
        return refused
    stub = stub_of(request)
    since_raw = request.query_params.get("since", "0")
    since = int(since_raw) if since_raw.isdigit() else 0
    agent = request.query_params.get("agent") or None
    agents = {
        name: {
            "description": script.description,
            "models": script.models,
            "source": stub.scripts.sources[name],
            "requests": 0,
            "errors": 0,
            "p50_ms": None,
            "max_ms": None,
        }
        for name, script in stub.scripts.agents.items()
    }
    for name, numbers in stub.journal.summary().items():
        agents.setdefault(name, {}).update(numbers)
    return JSONResponse(
        {
            "count": stub.journal.count,
            "agents": agents,
            "turns": stub.journal.turns(agent=agent, since=since),
        }
    )


async def index(request: Request) -> Response:
    return _operator_only(request, page=True) or pages.index()


async def page_script(request: Request) -> Response:
    return _operator_only(request) or pages.script()


async def page_css(request: Request) -> Response:
    return _operator_only(request) or pages.stylesheet()


async def _not_found(request: Request, exc: Exception) -> Response:
    stub = stub_of(request)
    provider = provider_of(request)
    entry = stub.begin(request, "unhandled", provider)
    status = getattr(exc, "status_code", 404)
    status = status if status in (404, 405) else 404
    log.warning("UNHANDLED %s %s", request.method, request.url.path)
    message = f"Invalid URL ({request.method} {request.url.path})"
    if status == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    return error_reply(stub, entry, Refusal(status, message, code="unknown_url", tag="UNHANDLED"))


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("internal error on %s %s: %r", request.method, request.url.path, exc)
    stub = stub_of(request)
    provider = provider_of(request)
    entry = stub.begin(request, "error", provider)
    return error_reply(stub, entry, Refusal(500, "the stub failed on this request", tag="INTERNAL"))


class _ArrivalClock:
    """Stamps each HTTP request's arrival (`scope["state"]["t0"]`) before any routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope.setdefault("state", {})["t0"] = time.perf_counter()
        await self.app(scope, receive, send)


ROUTES = [
    Route("/v1/messages", messages, methods=["POST"]),
    Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),
    Route("/v1/responses", responses, methods=["POST"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    Route("/v1/models", models, methods=["GET"]),
    Route("/_stub/health", health, methods=["GET"]),
    Route("/_stub/turns", turns, methods=["GET"]),
    Route("/_stub/login-link", login_link, methods=["POST"]),
    Route("/_stub/page.js", page_script, methods=["GET"]),
    Route("/_stub/page.css", page_css, methods=["GET"]),
    Route("/_stub/login.js", login_script, methods=["GET"]),
    Route("/login", login_page, methods=["GET"]),
    Route("/login", login, methods=["POST"]),
    Route("/", index, methods=["GET"]),
]


def build_app(stub: Stub) -> ASGIApp:
    app = Starlette(
        routes=ROUTES,
        exception_handlers={404: _not_found, 405: _not_found, Exception: _server_error},
    )
    app.state.stub = stub
    return _ArrivalClock(app)
