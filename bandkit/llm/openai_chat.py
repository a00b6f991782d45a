"""The OpenAI Chat Completions API as the stub speaks it (the wire CrewAI uses).

`POST /v1/chat/completions`: non-streaming, one `chat.completion` whose message holds the
text and `tool_calls` (`finish_reason` `stop` or `tool_calls`); with `stream: true`,
`chat.completion.chunk`s with a `delta` (role first, then `content` pieces, then
`tool_calls` with the id and name and the arguments in pieces), a last chunk with the
`finish_reason`, a usage chunk when `stream_options.include_usage`, then `data: [DONE]`.
Tool results come back as `role: tool` messages whose `tool_call_id` names the call.
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


def conversation(body: dict[str, Any]) -> Conversation:
    model = require(body, "model", str, "a valid string")
    messages = require(body, "messages", list, "a valid list")
    if not messages:
        raise BadRequest("messages: at least one message is required", "messages")
    calls: dict[str, str] = {}
    message: str | None = None
    last_tool: str | None = None
    last_result: str | None = None
    new_turn = True
    for index, item in enumerate(messages):
        role = item.get("role") if isinstance(item, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool", "function"):
            raise BadRequest(
                f"Invalid value for 'messages[{index}].role'", f"messages[{index}].role"
            )
        assert isinstance(item, dict)
        if role == "assistant":
            for call in item.get("tool_calls") or []:
                if isinstance(call, dict) and isinstance(call.get("function"), dict):
                    calls[str(call.get("id"))] = str(call["function"].get("name"))
            new_turn = True
        elif role in ("tool", "function"):
            last_tool = calls.get(str(item.get("tool_call_id"))) or item.get("name")
            last_result = text_of(item.get("content"))
            new_turn = False
        elif role == "user":
            message = text_of(item.get("content"))
            new_turn = True
    options = body.get("stream_options")
    return Conversation(
        model=model,
        stream=optional_bool(body, "stream"),
        tools=tool_names(body.get("tools")),
        message=message,
        last_tool=last_tool,
        last_tool_result=last_result,
        new_turn=new_turn,
        items=len(messages),
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
    )


def _usage(input_tokens: int, output: int) -> dict[str, int]:
    return {
        "prompt_tokens": input_tokens,
        "completion_tokens": output,
        "total_tokens": input_tokens + output,
    }


def _tool_calls(decision: Decision) -> list[dict[str, Any]]:
    if decision.tool is None:
        return []
    arguments = json.dumps(decision.arguments, separators=(",", ":"))
    return [
        {
            "id": new_id("call"),
            "type": "function",
            "function": {"name": decision.tool, "arguments": arguments},
        }
    ]


def completion(decision: Decision, conv: Conversation, input_tokens: int) -> dict[str, Any]:
    """The non-streaming answer: one `chat.completion`."""
    message: dict[str, Any] = {"role": "assistant", "content": decision.text, "refusal": None}
    calls = _tool_calls(decision)
    if calls:
        message["tool_calls"] = calls
    return {
        "id": new_id("chatcmpl"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": conv.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": _usage(input_tokens, output_tokens(decision)),
        "system_fingerprint": None,
    }


def stream(decision: Decision, conv: Conversation, input_tokens: int) -> list[str]:
    """The streaming answer: every SSE `data:` line, ending with `[DONE]`."""
    whole = completion(decision, conv, input_tokens)
    head = {k: whole[k] for k in ("id", "created", "model", "system_fingerprint")}
    frames: list[str] = []

    def emit(delta: dict[str, Any], finish: str | None = None) -> None:
        chunk = {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        frames.append(f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n")

    emit({"role": "assistant", "content": "", "refusal": None})
    for part in chunks(decision.text) if decision.text else []:
        emit({"content": part})
    for index, call in enumerate(whole["choices"][0]["message"].get("tool_calls", [])):
        emit(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""},
                    }
                ]
            }
        )
        for part in chunks(call["function"]["arguments"], 16):
            emit({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
    emit({}, whole["choices"][0]["finish_reason"])
    if conv.include_usage:
        usage = {**head, "object": "chat.completion.chunk", "choices": [], "usage": whole["usage"]}
        frames.append(f"data: {json.dumps(usage, separators=(',', ':'))}\n\n")
    frames.append("data: [DONE]\n\n")
    return frames
