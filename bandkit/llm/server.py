"""The stub's HTTP server: routes, the request pipeline, and the lifecycle.

Pipeline of a model request (`_answer`): read the JSON body → check the provider's key
(`keys`) → read the conversation (`anthropic`, `openai_responses`, `openai_chat`) → select
the agent's script → first matching rule → render JSON or SSE frames. Any refusal is
answered in the provider's error shape with a log line; every request, refused or not,
becomes a journal entry (`journal`). Nothing waits on anything: a reply is computed
before its first byte is sent, so a request never hangs.

Lifecycle as the emulator's: we bind the socket ourselves (a busy port is an
`LLMStubError`), drive uvicorn's `startup` / `shutdown` from our own loop, set `ready`
once clients can connect, and stop within a bounded grace period.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bandkit import daemons
from bandkit.llm import anthropic, openai_chat, openai_common, openai_responses, pages
from bandkit.llm.conversation import BadRequest, Conversation
from bandkit.llm.errors import LLMStubError
from bandkit.llm.journal import Journal, Redactor, preview
from bandkit.llm.keys import KeyRing, Problem, presented_key
from bandkit.llm.lines import LineCursor
from bandkit.llm.script import Decision, Script, ScriptSet

log = logging.getLogger("bandkit.llm")

AGENT_HEADER = "x-stub-agent"
LOCAL_NAMES = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class StubConfig:
    """Everything `python -m bandkit.llm` can set; defaults live here only."""

    host: str = "127.0.0.1"
    port: int = 0
    log_file: Path | None = None  # the JSONL request log
    shutdown_timeout: float = 5.0
    access_log: bool = False
    keep_turns: int = 2000
    max_body: int = 32 * 1024 * 1024


@dataclass(frozen=True)
class Api:
    name: str
    provider: str
    read: Callable[[dict[str, Any]], Conversation]
    body: Callable[[Decision, Conversation, int], dict[str, Any]]
    frames: Callable[[Decision, Conversation, int], list[str]]


MESSAGES = Api(
    "anthropic.messages", "anthropic", anthropic.conversation, anthropic.message, anthropic.stream
)
RESPONSES = Api(
    "openai.responses",
    "openai",
    openai_responses.conversation,
    openai_responses.response,
    openai_responses.stream,
)
CHAT = Api(
    "openai.chat", "openai", openai_chat.conversation, openai_chat.completion, openai_chat.stream
)


class Refusal(Exception):
    """A request answered with an error in the provider's shape (and a log line)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        tag: str = "REFUSED",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.tag = tag


@dataclass
class Entry:
    """One request on its way through; becomes a journal line when it is answered."""

    seq: int
    api: str
    provider: str
    method: str
    path: str
    t0: float
    at: str
    headers: list[tuple[str, str]]
    body: Any = None
    agent: str | None = None
    selected_by: str | None = None
    turn: int | None = None
    model: str | None = None
    stream: bool = False
    rule: str | None = None
    reply: dict[str, Any] | None = None
    request: dict[str, Any] = field(default_factory=dict)
    status: int = 0
    error: str | None = None
    request_id: str = ""


class Stub:
    """What the routes share: scripts, keys, the journal and the counters."""

    def __init__(self, config: StubConfig, scripts: ScriptSet, keys: KeyRing) -> None:
        unknown = sorted(keys.agents() - set(scripts.agents))
        if unknown:
            raise LLMStubError(
                f"the key file binds keys to agents without a script: {', '.join(unknown)}"
            )
        self.config = config
        self.scripts = scripts
        self.keys = keys
        self.journal = Journal(config.log_file, Redactor(keys.secrets()), keep=config.keep_turns)
        self.seq = 0
        self.turns: dict[str, int] = {}
        self.cursors: dict[str, LineCursor] = {}
        self.started = time.time()

    def begin(self, request: Request, api: str, provider: str) -> Entry:
        self.seq += 1
        t0 = request.scope.get("state", {}).get("t0") or time.perf_counter()
        return Entry(
            seq=self.seq,
            api=api,
            provider=provider,
            method=request.method,
            path=request.url.path,
            t0=t0,
            at=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw],
            request_id=anthropic.new_id("req"),
        )

    def finish(self, entry: Entry, first: float | None, last: float | None) -> None:
        def ms(t: float | None) -> float | None:
            return None if t is None else round((t - entry.t0) * 1000, 3)

        turn = {
            "seq": entry.seq,
            "at": entry.at,
            "api": entry.api,
            "method": entry.method,
            "path": entry.path,
            "status": entry.status,
            "agent": entry.agent,
            "turn": entry.turn,
            "selected_by": entry.selected_by,
            "model": entry.model,
            "stream": entry.stream,
            "rule": entry.rule,
            "reply": entry.reply,
            "request": entry.request,
            "error": entry.error,
            "request_id": entry.request_id,
            "ms_first": ms(first),
            "ms_last": ms(last),
        }
        clean = self.journal.record(
            turn, {"headers": self.journal.redactor.headers(entry.headers), "body": entry.body}
        )
        level = logging.INFO if entry.status < 400 else logging.WARNING
        what = clean["error"] if entry.error else _describe(clean["reply"])
        log.log(
            level,
            "%s #%d %s %s agent=%s turn=%s rule=%s: %s (%s ms)",
            entry.api,
            entry.seq,
            entry.status,
            "stream" if entry.stream else "json",
            entry.agent,
            entry.turn,
            entry.rule,
            what,
            clean["ms_last"],
        )


def _describe(reply: dict[str, Any] | None) -> str:
    if not reply:
        return "-"
    parts = []
    if reply.get("text"):
        parts.append(f"text {preview(reply['text'], 60)!r}")
    if reply.get("tool"):
        parts.append(f"tool {reply['tool']}")
    return " + ".join(parts)


def _stub(request: Request) -> Stub:
    stub: Stub = request.app.state.stub
    return stub


# --- error shapes --------------------------------------------------------------------------


def _provider_of(request: Request) -> str:
    """Anthropic for /v1/messages* or a request with `x-api-key` / `anthropic-version`."""
    if request.url.path.startswith("/v1/messages"):
        return "anthropic"
    headers = request.headers
    if "x-api-key" in headers or "anthropic-version" in headers:
        return "anthropic"
    return "openai"


def _error(stub: Stub, entry: Entry, refusal: Refusal) -> Response:
    entry.status = refusal.status
    entry.error = f"{refusal.tag}: {refusal.message}"
    if entry.provider == "anthropic":
        body = anthropic.error_body(refusal.status, refusal.message, entry.request_id)
        headers = {"request-id": entry.request_id}
    else:
        body = openai_common.error_body(
            refusal.status, refusal.message, code=refusal.code, param=refusal.param
        )
        headers = {"x-request-id": entry.request_id}
    return _json(stub, entry, body, refusal.status, headers)


def _json(
    stub: Stub, entry: Entry, body: dict[str, Any], status: int, headers: dict[str, str]
) -> Response:
    """A JSON answer; its journal entry is written once the body has been sent."""

    async def sent() -> None:  # async: run at once, not in a thread after the client moved on
        now = time.perf_counter()
        stub.finish(entry, now, now)

    return Response(
        json.dumps(body, separators=(",", ":")),
        status_code=status,
        media_type="application/json",
        headers=headers,
        background=BackgroundTask(sent),
    )


# --- the pipeline --------------------------------------------------------------------------


async def _json_body(request: Request, limit: int) -> tuple[dict[str, Any], int]:
    """The request's JSON object and its size in bytes; Refusal 413 / 400 otherwise."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Refusal(413, f"request body is larger than {limit} bytes", tag="TOO_LARGE")
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise Refusal(413, f"request body is larger than {limit} bytes", tag="TOO_LARGE")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refusal(400, f"the request body is not valid JSON ({exc})", tag="BAD_INPUT") from None
    if not isinstance(body, dict):
        raise Refusal(400, "the request body must be a JSON object", tag="BAD_INPUT")
    return body, len(raw)


AUTH_MESSAGES = {
    ("anthropic", Problem.MISSING): "x-api-key header is required",
    ("anthropic", Problem.INVALID): "invalid x-api-key",
    ("openai", Problem.MISSING): (
        "You didn't provide an API key. Provide it in an Authorization header (Bearer auth)."
    ),
    ("openai", Problem.INVALID): "Incorrect API key provided.",
}


def _authenticate(stub: Stub, entry: Entry, request: Request) -> str | None:
    """The agent a bound key selects; Refusal 401 for a missing, placeholder or wrong key."""
    verdict = stub.keys.check(entry.provider, presented_key(entry.provider, entry.headers))
    if verdict.ok:
        return verdict.agent
    problem = verdict.problem
    if problem is Problem.PLACEHOLDER:
        message = (
            "a placeholder API key reached the model endpoint: the real key was not put in "
            "on the way (custody check failed)"
        )
        log.warning(
            "CUSTODY %s #%d: placeholder key on %s %s from %s",
            entry.api,
            entry.seq,
            entry.method,
            entry.path,
            request.client.host if request.client else "?",
        )
        tag = "CUSTODY"
    elif problem is Problem.UNCONFIGURED:
        message = f"this stub has no {entry.provider} key configured; add one to its key file"
        tag = "AUTH"
    else:
        assert problem is not None
        message = AUTH_MESSAGES[(entry.provider, problem)]
        tag = "AUTH"
    raise Refusal(401, message, code="invalid_api_key", tag=tag)


def _select(
    stub: Stub, entry: Entry, request: Request, key_agent: str | None
) -> tuple[Script, int]:
    """The script that answers, and this request's turn number for its agent."""
    header = request.headers.get(AGENT_HEADER)
    script, how = stub.scripts.select(header=header, key_agent=key_agent, model=entry.model)
    loaded = ", ".join(stub.scripts.agents)
    if script is None:
        if how == "header":
            message = (
                f"{AGENT_HEADER} names agent {header!r}, which has no script (loaded: {loaded})"
            )
        else:
            message = (
                f"model {entry.model!r} selects no script (loaded agents: {loaded}); use a model "
                f"name from a script's `models` or its agent name, or send {AGENT_HEADER}"
            )
        raise Refusal(404, message, code="model_not_found", param="model", tag="NO_SCRIPT")
    turn = stub.turns[script.agent] = stub.turns.get(script.agent, 0) + 1
    entry.agent, entry.selected_by, entry.turn = script.agent, how, turn
    return script, turn


def _summarise(conv: Conversation) -> dict[str, Any]:
    return {
        "message": preview(conv.message),
        "tools_offered": list(conv.tools),
        "last_tool": conv.last_tool,
        "last_tool_result": preview(conv.last_tool_result),
        "new_turn": conv.new_turn,
        "items": conv.items,
    }


async def _answer(request: Request, api: Api) -> Response:
    stub = _stub(request)
    entry = stub.begin(request, api.name, api.provider)
    try:
        body, size = await _json_body(request, stub.config.max_body)
        entry.body = body
        if isinstance(body.get("model"), str):
            entry.model = body["model"]
        key_agent = _authenticate(stub, entry, request)
        try:
            conv = api.read(body)
        except BadRequest as exc:
            raise Refusal(400, exc.message, param=exc.param, tag="BAD_INPUT") from None
        entry.stream = conv.stream
        entry.request = _summarise(conv)
        script, turn = _select(stub, entry, request, key_agent)
        line = None
        if script.lines is not None:
            cursor = stub.cursors.setdefault(script.agent, LineCursor(script.lines.peers))
            line = cursor.line_of(conv.message)
            entry.request["line"] = line
        decision = script.decide(conv, turn=turn, request=entry.seq, line=line)
        if decision is None:
            raise Refusal(
                400,
                f"agent {script.agent!r} has no rule for this request and no default "
                f"(message {preview(conv.message, 80)!r}, tools {list(conv.tools)}, "
                f"last tool result {preview(conv.last_tool_result, 80)!r}, "
                f"new turn {conv.new_turn})",
                code="stub_unscripted",
                tag="UNSCRIPTED",
            )
    except Refusal as refusal:
        return _error(stub, entry, refusal)
    entry.rule = decision.rule
    entry.reply = {"text": decision.text, "tool": decision.tool, "arguments": decision.arguments}
    if decision.tool is not None and not decision.tool_offered:
        log.warning(
            "%s #%d: agent %s calls tool %r, which the request did not offer (offered: %s)",
            api.name,
            entry.seq,
            entry.agent,
            decision.tool,
            ", ".join(conv.tools) or "none",
        )
    entry.status = 200
    input_tokens = max(1, size // 4)  # a rough count: about four bytes a token
    headers = {"request-id" if api.provider == "anthropic" else "x-request-id": entry.request_id}
    if not conv.stream:
        return _json(stub, entry, api.body(decision, conv, input_tokens), 200, headers)
    frames = api.frames(decision, conv, input_tokens)
    return StreamingResponse(
        _send(stub, entry, frames),
        media_type="text/event-stream; charset=utf-8",
        headers={**headers, "cache-control": "no-cache", "x-accel-buffering": "no"},
    )


async def _send(stub: Stub, entry: Entry, frames: list[str]) -> AsyncIterator[bytes]:
    first: float | None = None
    sent = 0
    try:
        for frame in frames:
            yield frame.encode()
            # Resumed once the frame went out: the time it was sent.
            sent += 1
            if first is None:
                first = time.perf_counter()
    finally:
        if sent < len(frames):
            entry.error = f"DISCONNECTED: the client went away after {sent} of {len(frames)} events"
        stub.finish(entry, first, time.perf_counter() if sent else None)


async def messages(request: Request) -> Response:
    return await _answer(request, MESSAGES)


async def responses(request: Request) -> Response:
    return await _answer(request, RESPONSES)


async def chat_completions(request: Request) -> Response:
    return await _answer(request, CHAT)


async def count_tokens(request: Request) -> Response:
    stub = _stub(request)
    entry = stub.begin(request, "anthropic.count_tokens", "anthropic")
    try:
        body, size = await _json_body(request, stub.config.max_body)
        entry.body = body
        _authenticate(stub, entry, request)
        try:
            conv = anthropic.conversation(body, count_only=True)
        except BadRequest as exc:
            raise Refusal(400, exc.message, param=exc.param, tag="BAD_INPUT") from None
    except Refusal as refusal:
        return _error(stub, entry, refusal)
    entry.model, entry.status = conv.model, 200
    tokens = max(1, size // 4)
    return _json(stub, entry, {"input_tokens": tokens}, 200, {"request-id": entry.request_id})


async def models(request: Request) -> Response:
    stub = _stub(request)
    provider = _provider_of(request)
    entry = stub.begin(request, f"{provider}.models", provider)
    try:
        _authenticate(stub, entry, request)
    except Refusal as refusal:
        return _error(stub, entry, refusal)
    entry.status = 200
    names = stub.scripts.model_names()
    if provider == "anthropic":
        return _json(
            stub, entry, anthropic.models_page(names), 200, {"request-id": entry.request_id}
        )
    return _json(
        stub, entry, openai_common.models_page(names), 200, {"x-request-id": entry.request_id}
    )


# --- the stub's own pages (loopback only) ---------------------------------------------------


def _local_only(request: Request) -> Response | None:
    """403 unless both the client and the `Host` it named are this machine (no rebinding)."""
    client = request.client.host if request.client else ""
    try:
        loopback = ipaddress.ip_address(client).is_loopback
    except ValueError:
        loopback = False
    named = (urlsplit(f"//{request.headers.get('host', '')}").hostname or "").lower()
    if not loopback or named not in LOCAL_NAMES:
        return JSONResponse(
            {"error": {"message": "the stub's pages answer loopback clients only"}},
            status_code=403,
        )
    return None


async def health(request: Request) -> Response:
    if (refused := _local_only(request)) is not None:
        return refused
    stub = _stub(request)
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
    if (refused := _local_only(request)) is not None:
        return refused
    stub = _stub(request)
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
    return _local_only(request) or pages.index()


async def page_script(request: Request) -> Response:
    return _local_only(request) or pages.script()


async def page_css(request: Request) -> Response:
    return _local_only(request) or pages.stylesheet()


async def _not_found(request: Request, exc: Exception) -> Response:
    stub = _stub(request)
    provider = _provider_of(request)
    entry = stub.begin(request, "unhandled", provider)
    status = getattr(exc, "status_code", 404)
    status = status if status in (404, 405) else 404
    log.warning("UNHANDLED %s %s", request.method, request.url.path)
    message = f"Invalid URL ({request.method} {request.url.path})"
    if status == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    return _error(stub, entry, Refusal(status, message, code="unknown_url", tag="UNHANDLED"))


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("internal error on %s %s: %r", request.method, request.url.path, exc)
    stub = _stub(request)
    provider = _provider_of(request)
    entry = stub.begin(request, "error", provider)
    return _error(stub, entry, Refusal(500, "the stub failed on this request", tag="INTERNAL"))


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
    Route("/_stub/page.js", page_script, methods=["GET"]),
    Route("/_stub/page.css", page_css, methods=["GET"]),
    Route("/", index, methods=["GET"]),
]


def build_app(stub: Stub) -> ASGIApp:
    app = Starlette(
        routes=ROUTES,
        exception_handlers={404: _not_found, 405: _not_found, Exception: _server_error},
    )
    app.state.stub = stub
    return _ArrivalClock(app)


# --- lifecycle ------------------------------------------------------------------------------


def _bind(host: str, port: int) -> socket.socket:
    try:
        return daemons.listen(host, port, backlog=256)
    except daemons.BindError as exc:
        raise LLMStubError(str(exc)) from None


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):  # noqa: S104 - rendering, not binding
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


class LLMStub:
    """The local model endpoint: one port, the Anthropic and OpenAI wire APIs, the turns."""

    def __init__(self, config: StubConfig, *, scripts: ScriptSet, keys: KeyRing) -> None:
        self.config = config
        self.stub = Stub(config, scripts, keys)
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self.url = ""
        self._server: uvicorn.Server | None = None

    async def startup(self) -> None:
        sock = _bind(self.config.host, self.config.port)
        port = sock.getsockname()[1]
        uv_config = uvicorn.Config(
            build_app(self.stub),
            lifespan="off",
            http="httptools",
            proxy_headers=False,
            timeout_graceful_shutdown=max(1, round(self.config.shutdown_timeout)),
            access_log=self.config.access_log,
            log_config=None,
            server_header=False,
        )
        self._server = uvicorn.Server(uv_config)
        uv_config.load()
        self._server.lifespan = uv_config.lifespan_class(uv_config)
        await self._server.startup(sockets=[sock])
        self.url = f"http://{_url_host(self.config.host)}:{port}"
        self.ready.set()
        log.info("serving on %s (agents: %s)", self.url, ", ".join(self.stub.scripts.agents))

    async def serve(self) -> None:
        await self.startup()
        try:
            await self._stop.wait()
        finally:
            await self.shutdown(self.config.shutdown_timeout)

    def stop(self) -> None:
        self._stop.set()

    def force(self) -> None:
        if self._server is not None:
            self._server.force_exit = True

    async def shutdown(self, timeout: float) -> None:
        server = self._server
        if server is not None:
            server.config.timeout_graceful_shutdown = max(1, round(timeout))
            try:
                await asyncio.wait_for(server.shutdown(), timeout=timeout + 1.0)
            except TimeoutError:
                log.error("shutdown did not finish within %.1f s; leaving the rest", timeout)
            self._server = None
        self.stub.journal.close()
        self.ready.clear()


run_until_signalled = daemons.run_until_signalled
