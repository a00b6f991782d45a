"""Error shapes: a refused request answered in its provider's own shape, and JSON replies.

A `Refusal` raised anywhere in the pipeline becomes `error_reply`: Anthropic's or OpenAI's
error body (`anthropic.error_body`, `openai_common.error_body`) with the provider's
request-id header. Every JSON answer goes through `json_reply`, which writes the
request's journal entry once the body has been sent.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response

from bandkit.llm import anthropic, openai_common
from bandkit.llm.state import Entry, Stub


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


def provider_of(request: Request) -> str:
    """Anthropic for /v1/messages* or a request with `x-api-key` / `anthropic-version`."""
    if request.url.path.startswith("/v1/messages"):
        return "anthropic"
    headers = request.headers
    if "x-api-key" in headers or "anthropic-version" in headers:
        return "anthropic"
    return "openai"


def error_reply(stub: Stub, entry: Entry, refusal: Refusal) -> Response:
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
    return json_reply(stub, entry, body, refusal.status, headers)


def json_reply(
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
