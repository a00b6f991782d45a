"""The Anthropic Messages API as the stub speaks it: request reading, JSON, SSE, errors.

`POST /v1/messages` (the Claude CLI adds `?beta=true`, ignored): non-streaming it answers
one `message` object; with `stream: true` the events `message_start`, per content block
`content_block_start` / `content_block_delta` (`text_delta`, or `input_json_delta` for a
`tool_use` block) / `content_block_stop`, then `message_delta` (stop_reason `end_turn` or
`tool_use`, output usage) and `message_stop`. Errors are
`{"type": "error", "error": {"type", "message"}, "request_id"}`.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from bandkit.llm.conversation import (
    BadRequest,
    Conversation,
    optional_bool,
    require,
    text_of,
    tool_names,
)
from bandkit.llm.script import Decision

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
CREATED_AT = "2026-01-01T00:00:00Z"


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def error_body(status: int, message: str, request_id: str) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}


# `system` inside `messages`: mid-conversation instructions, which the claude CLI 2.1.3xx
# sends (the API accepts them); they neither start nor end a turn.
ROLES = ("user", "assistant", "system")


def _tool_results(content: list[Any]) -> list[dict[str, Any]]:
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]


def conversation(body: dict[str, Any], *, count_only: bool = False) -> Conversation:
    """Read a Messages request (`count_only`: a count_tokens body, no max_tokens)."""
    model = require(body, "model", str, "a valid string")
    if not count_only:
        require(body, "max_tokens", int, "a valid integer")
    messages = require(body, "messages", list, "a valid list")
    if not messages:
        raise BadRequest("messages: at least one message is required", "messages")
    tool_by_id: dict[str, str] = {}
    message: str | None = None
    last_tool: str | None = None
    last_result: str | None = None
    new_turn = True
    for index, item in enumerate(messages):
        if not isinstance(item, dict) or item.get("role") not in ROLES:
            raise BadRequest(
                f"messages.{index}: each message needs role 'user', 'assistant' or 'system'",
                f"messages.{index}.role",
            )
        content = item.get("content")
        if not isinstance(content, str | list):
            raise BadRequest(f"messages.{index}.content: Field required", f"messages.{index}")
        if item["role"] == "system":
            continue  # instructions between turns (the claude CLI sends them): no turn
        blocks = content if isinstance(content, list) else []
        if item["role"] == "assistant":
            for block in blocks:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    tool_by_id[str(block.get("id"))] = str(block.get("name"))
            new_turn = True
            continue
        results = _tool_results(blocks)
        if results:
            last = results[-1]
            last_tool = tool_by_id.get(str(last.get("tool_use_id")))
            last_result = text_of(last.get("content"))
            new_turn = False
        else:
            message = text_of(content)
            new_turn = True
    return Conversation(
        model=model,
        stream=optional_bool(body, "stream"),
        tools=tool_names(body.get("tools")),
        message=message,
        last_tool=last_tool,
        last_tool_result=last_result,
        new_turn=new_turn,
        items=len(messages),
    )


def _content(decision: Decision) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if decision.text:
        blocks.append({"type": "text", "text": decision.text})
    if decision.tool is not None:
        blocks.append(
            {
                "type": "tool_use",
                "id": new_id("toolu"),
                "name": decision.tool,
                "input": decision.arguments,
            }
        )
    return blocks


def _usage(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def output_tokens(decision: Decision) -> int:
    size = len(decision.text or "") + len(json.dumps(decision.arguments)) * bool(decision.tool)
    return max(1, size // 4)


def message(decision: Decision, conv: Conversation, input_tokens: int) -> dict[str, Any]:
    """The non-streaming answer: one `message` object."""
    return {
        "id": new_id("msg"),
        "type": "message",
        "role": "assistant",
        "model": conv.model,
        "content": _content(decision),
        "stop_reason": "tool_use" if decision.tool is not None else "end_turn",
        "stop_sequence": None,
        "usage": _usage(input_tokens, output_tokens(decision)),
    }


def _frame(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def chunks(text: str, size: int = 24) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def stream(decision: Decision, conv: Conversation, input_tokens: int) -> list[str]:
    """The streaming answer: every SSE frame, in order."""
    whole = message(decision, conv, input_tokens)
    start = {**whole, "content": [], "stop_reason": None, "usage": _usage(input_tokens, 1)}
    frames = [_frame("message_start", {"type": "message_start", "message": start})]
    for index, block in enumerate(whole["content"]):
        if block["type"] == "text":
            opening: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": part} for part in chunks(block["text"])]
        else:
            opening = {**block, "input": {}}
            encoded = json.dumps(block["input"], separators=(",", ":"))
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in ["", *chunks(encoded, 16)]
            ]
        frames.append(
            _frame(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": opening},
            )
        )
        if index == 0:
            frames.append(_frame("ping", {"type": "ping"}))
        frames += [
            _frame(
                "content_block_delta",
                {"type": "content_block_delta", "index": index, "delta": delta},
            )
            for delta in deltas
        ]
        frames.append(_frame("content_block_stop", {"type": "content_block_stop", "index": index}))
    frames.append(
        _frame(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": whole["usage"]["output_tokens"]},
            },
        )
    )
    frames.append(_frame("message_stop", {"type": "message_stop"}))
    return frames


def models_page(names: list[str]) -> dict[str, Any]:
    data = [
        {
            "type": "model",
            "id": name,
            "display_name": f"{name} (bandkit llm stub)",
            "created_at": CREATED_AT,
        }
        for name in names
    ]
    return {
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }
