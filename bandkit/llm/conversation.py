"""What a script is matched on, read the same way from every wire API.

Each wire module (`anthropic`, `openai_responses`, `openai_chat`) turns a request body into
one `Conversation`: the model asked for, the tool names offered, the text of the last user
message, the last tool result (and which tool produced it), and whether the request starts
a new turn (its last input item is not a tool result). A body the API would refuse raises
`BadRequest`, which the server renders in that provider's error shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class BadRequest(Exception):
    """A request body the real API would refuse with 400; `param` names the field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True)
class Conversation:
    model: str
    stream: bool
    tools: tuple[str, ...]
    message: str | None  # text of the last user message that is not a tool result
    last_tool: str | None  # name of the tool whose result came last (None if unknown)
    last_tool_result: str | None
    new_turn: bool  # the last input item is not a tool result
    items: int  # messages (or input items) in the request
    include_usage: bool = False  # chat completions: stream_options.include_usage


def require(body: Mapping[str, Any], name: str, kind: type | tuple[type, ...], what: str) -> Any:
    """`body[name]`, or BadRequest naming the field the way the providers do."""
    if name not in body or body[name] is None:
        raise BadRequest(f"{name}: Field required", name)
    value = body[name]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise BadRequest(f"{name}: Input should be {what}", name)
    return value


def optional_bool(body: Mapping[str, Any], name: str) -> bool:
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise BadRequest(f"{name}: Input should be a valid boolean", name)
    return value


def text_of(content: Any, kinds: Iterable[str] = ("text", "input_text", "output_text")) -> str:
    """The text of a message's content: a string, or the text parts of a list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        wanted = set(kinds)
        parts = [
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") in wanted
            and isinstance(part.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def tool_names(tools: Any, param: str = "tools") -> tuple[str, ...]:
    """Names of the offered tools: `name`, else `function.name`, else the tool's `type`."""
    if tools is None:
        return ()
    if not isinstance(tools, list):
        raise BadRequest(f"{param}: Input should be a valid list", param)
    names: list[str] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise BadRequest(f"{param}.{index}: Input should be an object", f"{param}[{index}]")
        function = tool.get("function")
        name = tool.get("name")
        if not isinstance(name, str) and isinstance(function, dict):
            name = function.get("name")
        if not isinstance(name, str):
            name = tool.get("type")
        if isinstance(name, str) and name:
            names.append(name)
    return tuple(names)
