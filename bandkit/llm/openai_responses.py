"""The OpenAI Responses API as the stub speaks it (the wire Codex uses).

`POST /v1/responses`: non-streaming, one `response` object; with `stream: true` the events
`response.created`, `response.in_progress`, then per output item
`response.output_item.added`, for a message `response.content_part.added` /
`response.output_text.delta` / `response.output_text.done` / `response.content_part.done`,
for a `function_call` `response.function_call_arguments.delta` / `.done`, then
`response.output_item.done`, and last `response.completed` with the whole response and its
usage. Every event carries a `sequence_number`. On the next request the
`function_call_output` items are the tool results (their `call_id` names the call).
"""

from __future__ import annotations

import json
import time
from typing import Any

from bandkit.llm.anthropic import chunks, new_id, output_tokens
from bandkit.llm.conversation import (
    BadRequest,
    Conversation,
    optional_bool,
    require,
    text_of,
    tool_names,
)
from bandkit.llm.script import Decision

TOOL_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def conversation(body: dict[str, Any]) -> Conversation:
    model = require(body, "model", str, "a valid string")
    raw = require(body, "input", (str, list), "a string or a list of input items")
    items: list[Any] = (
        [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else raw
    )
    calls: dict[str, str] = {}
    message: str | None = None
    last_tool: str | None = None
    last_result: str | None = None
    new_turn = True
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"input[{index}]: Input should be an object", f"input[{index}]")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            if item.get("role") == "user":
                message = text_of(item.get("content"))
            new_turn = True
        elif kind in ("function_call", "custom_tool_call"):
            calls[str(item.get("call_id"))] = str(item.get("name"))
            new_turn = True
        elif kind in TOOL_OUTPUTS:
            if "call_id" not in item:
                raise BadRequest(f"input[{index}].call_id: Field required", f"input[{index}]")
            last_tool = calls.get(str(item["call_id"]))
            output = item.get("output")
            last_result = text_of(output) if not isinstance(output, str) else output
            new_turn = False
        elif kind is None:
            raise BadRequest(f"input[{index}].type: Field required", f"input[{index}].type")
        else:
            new_turn = True
    return Conversation(
        model=model,
        stream=optional_bool(body, "stream"),
        tools=tool_names(body.get("tools")),
        message=message,
        last_tool=last_tool,
        last_tool_result=last_result,
        new_turn=new_turn,
        items=len(items),
    )


def _items(decision: Decision) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if decision.text:
        out.append(
            {
                "id": new_id("msg"),
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": decision.text, "annotations": []}],
            }
        )
    if decision.tool is not None:
        out.append(
            {
                "id": new_id("fc"),
                "type": "function_call",
                "status": "completed",
                "call_id": new_id("call"),
                "name": decision.tool,
                "arguments": json.dumps(decision.arguments, separators=(",", ":")),
            }
        )
    return out


def _response(conv: Conversation, response_id: str, created: int) -> dict[str, Any]:
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "model": conv.model,
        "output": [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": None,
        "metadata": {},
    }


def _usage(input_tokens: int, output: int) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input_tokens + output,
    }


def response(decision: Decision, conv: Conversation, input_tokens: int) -> dict[str, Any]:
    """The non-streaming answer: a completed `response`."""
    whole = _response(conv, new_id("resp"), int(time.time()))
    return {
        **whole,
        "status": "completed",
        "output": _items(decision),
        "usage": _usage(input_tokens, output_tokens(decision)),
    }


def stream(decision: Decision, conv: Conversation, input_tokens: int) -> list[str]:
    """The streaming answer: every SSE frame, in order."""
    done = response(decision, conv, input_tokens)
    frames: list[str] = []

    def emit(kind: str, **data: Any) -> None:
        payload = {"type": kind, "sequence_number": len(frames), **data}
        frames.append(f"event: {kind}\ndata: {json.dumps(payload, separators=(',', ':'))}\n\n")

    opening = {**done, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=opening)
    emit("response.in_progress", response=opening)
    for index, item in enumerate(done["output"]):
        at = {"output_index": index}
        if item["type"] == "message":
            text = item["content"][0]["text"]
            emit(
                "response.output_item.added",
                **at,
                item={**item, "status": "in_progress", "content": []},
            )
            ids = {"item_id": item["id"], **at, "content_index": 0}
            emit(
                "response.content_part.added",
                **ids,
                part={"type": "output_text", "text": "", "annotations": []},
            )
            for part in chunks(text):
                emit("response.output_text.delta", **ids, delta=part, logprobs=[])
            emit("response.output_text.done", **ids, text=text, logprobs=[])
            emit("response.content_part.done", **ids, part=item["content"][0])
        else:
            emit(
                "response.output_item.added",
                **at,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            for part in chunks(item["arguments"], 16):
                emit("response.function_call_arguments.delta", item_id=item["id"], **at, delta=part)
            emit(
                "response.function_call_arguments.done",
                item_id=item["id"],
                **at,
                name=item["name"],
                arguments=item["arguments"],
            )
        emit("response.output_item.done", **at, item=item)
    emit("response.completed", response=done)
    return frames
