"""REST plumbing shared by the human, agent and control routes.

`endpoint(kind)` wraps a handler with: `X-API-Key` authentication (401 without a valid
key, 403 with the other kind's key; with `session=True`, the human API, a room page's
session cookie stands for the user key, see `access.py`), the pause gate (agent API
only), and the platform's error shape
`{"error": {"code", "message", "request_id"[, "details"]}}` for every `ApiFailure`.
Body and query helpers raise `ApiFailure` with JSON pointers, so handlers stay short.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bandkit.emulator import messages
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import ApiFailure, invalid
from bandkit.emulator.state import Room

log = logging.getLogger("bandkit.emulator.rest")

MAX_ATTACHMENTS = 10  # files per message
Handler = Callable[[Request, Platform, Principal], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]


def error_response(
    status: int, code: str, message: str, details: dict[str, Any] | None = None
) -> JSONResponse:
    request_id = str(uuid.uuid4())
    error: dict[str, Any] = {"code": code, "message": message, "request_id": request_id}
    if details is not None:
        error["details"] = details
    return JSONResponse({"error": error}, status_code=status, headers={"x-request-id": request_id})


_ID_SEGMENT = re.compile(
    r"^(?:[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|\d+)$"
)
MAX_LOGGED_PATH = 200


def route_template(path: str) -> str:
    """A request path as a route template for the log: UUID and number segments become
    `{id}`, anything but printable ASCII is escaped, and it is cut at 200 characters."""
    segments = ["{id}" if _ID_SEGMENT.match(s) else s for s in path.split("/")]
    shown = "/".join(segments)[:MAX_LOGGED_PATH]
    return "".join(c if " " <= c <= "~" else f"\\x{ord(c):02x}" for c in shown)


def data(payload: Any, status: int = 200, **extra: Any) -> JSONResponse:
    return JSONResponse({"data": payload, **extra}, status_code=status)


def platform_of(request: Request) -> Platform:
    platform: Platform = request.app.state.platform
    return platform


def endpoint(kind: Kind, *, session: bool = False) -> Callable[[Handler], Endpoint]:
    """Authenticate as `kind`, wait out a pause (agent API only), and render failures.

    A pause holds what agents see (their API, every socket); the human and control
    APIs keep answering, so a drill can post a message while agents are cut off.
    `session=True` (user routes only) also takes a room page's call: no key, a live
    session cookie, and the page's own header and origin (`PageAccess.page_call_ok`).
    """

    def wrap(handler: Handler) -> Endpoint:
        async def run(request: Request) -> Response:
            platform = platform_of(request)
            principal = platform.authenticate(request.headers.get("x-api-key"))
            if (
                principal is None
                and session
                and not request.headers.get("x-api-key")
                and platform.pages.session_of(request) is not None
                and platform.pages.page_call_ok(request)
            ):
                principal = Principal(Kind.USER, platform.state.user.id)
            if principal is None:
                problem = "missing" if not request.headers.get("x-api-key") else "invalid"
                return error_response(401, "unauthorized", f"{problem} X-API-Key")
            if principal.kind is not kind:
                which = "an agent key" if principal.kind is Kind.AGENT else "the user key"
                return error_response(403, "forbidden", f"{which} cannot call this API")
            if kind is Kind.AGENT:
                await platform.gate.wait()
            try:
                return await handler(request, platform, principal)
            except ApiFailure as failure:
                return error_response(
                    failure.status, failure.code, failure.message, failure.details
                )

        run.__name__ = handler.__name__
        run.__doc__ = handler.__doc__
        return run

    return wrap


async def body(request: Request, root: str | None = None) -> dict[str, Any]:
    """The JSON object body (or its `root` member); 400 if not JSON, 422 if misshapen."""
    raw = await request.body()
    if not raw.strip():
        obj: Any = {}
    else:
        try:
            obj = json.loads(raw)
        except ValueError:
            raise ApiFailure(400, "bad_request", "request body is not valid JSON") from None
    if not isinstance(obj, dict):
        raise invalid("/", "must be a JSON object")
    if root is None:
        return obj
    inner = obj.get(root)
    if not isinstance(inner, dict):
        raise invalid(f"/{root}", "is required and must be an object")
    return inner


def required_text(obj: dict[str, Any], key: str, pointer: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"{pointer}/{key}", "can't be blank")
    return value


def optional_text(obj: dict[str, Any], key: str, pointer: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise invalid(f"{pointer}/{key}", "must be a string")
    return value


def int_query(request: Request, name: str, default: int, *, lo: int = 1, hi: int = 1000) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise invalid(f"/{name}", "must be an integer") from None
    if not lo <= value <= hi:
        raise invalid(f"/{name}", f"must be between {lo} and {hi}")
    return value


def paged(
    items: list[Any], request: Request, *, default_size: int = 100
) -> tuple[list[Any], dict[str, Any]]:
    """Page-number paging (`page`, `page_size`) with the metadata the SDK reads."""
    page = int_query(request, "page", 1, hi=1_000_000)
    size = int_query(request, "page_size", default_size, hi=1000)
    total = len(items)
    pages = max(1, -(-total // size))
    chunk = items[(page - 1) * size : page * size]
    meta = {
        "page": page,
        "page_size": size,
        "total_count": total,
        "total_pages": pages,
        "has_more": page < pages,
        "limit": size,
    }
    return chunk, meta


async def post_message_in(
    request: Request, platform: Platform, principal: Principal, room: Room
) -> Response:
    """POST a message to `room` as `principal`: the body both the human and agent APIs share."""
    fields = await body(request, "message")
    content = required_text(fields, "content", "/message")
    mentions = fields.get("mentions", [])
    if not isinstance(mentions, list) or not all(isinstance(m, dict) for m in mentions):
        raise invalid("/message/mentions", "must be a list of objects")
    attachment_ids = fields.get("attachment_ids", [])
    if not isinstance(attachment_ids, list) or not all(isinstance(i, str) for i in attachment_ids):
        raise invalid("/message/attachment_ids", "must be a list of file ids")
    if len(attachment_ids) > MAX_ATTACHMENTS:
        raise invalid("/message/attachment_ids", f"at most {MAX_ATTACHMENTS} files")
    message, recipients, outcome = messages.post_message(
        platform.state,
        room,
        principal.id,
        content,
        mentions,
        platform.now(),
        attachment_ids=attachment_ids,
    )
    platform.commit(outcome)
    return data({"id": message.id, "success": True, "recipients": recipients}, status=201)
