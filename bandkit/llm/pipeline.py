"""The per-request answer pipeline of the model endpoints (`answer`).

Read the JSON body (`json_body`) → check the provider's key (`authenticate`, the `keys`
custody check) → read the conversation (the wire module's `conversation`) → select the
agent's script (`ScriptSet.select`) → first matching rule (`Script.decide`) → render the
wire module's JSON body or SSE frames. Any refusal is answered in the provider's error
shape with a log line (`refusals`); every request, refused or not, becomes a journal
entry (`journal`). Nothing waits on anything: a reply is computed before its first byte
is sent, so a request never hangs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from bandkit.llm import anthropic, openai_chat, openai_responses
from bandkit.llm.conversation import BadRequest, Conversation
from bandkit.llm.journal import preview
from bandkit.llm.keys import Problem, presented_key
from bandkit.llm.lines import LineCursor
from bandkit.llm.refusals import Refusal, error_reply, json_reply
from bandkit.llm.script import Decision, Script
from bandkit.llm.state import Entry, Stub, stub_of

log = logging.getLogger("bandkit.llm")

AGENT_HEADER = "x-stub-agent"


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


async def json_body(request: Request, limit: int) -> tuple[dict[str, Any], int]:
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


def authenticate(stub: Stub, entry: Entry, request: Request) -> str | None:
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


async def answer(request: Request, api: Api) -> Response:
    stub = stub_of(request)
    entry = stub.begin(request, api.name, api.provider)
    try:
        body, size = await json_body(request, stub.config.max_body)
        entry.body = body
        if isinstance(body.get("model"), str):
            entry.model = body["model"]
        key_agent = authenticate(stub, entry, request)
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
        return error_reply(stub, entry, refusal)
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
        return json_reply(stub, entry, api.body(decision, conv, input_tokens), 200, headers)
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
