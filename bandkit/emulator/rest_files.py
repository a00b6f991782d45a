"""Room files (`PUT /api/v1/agent/chats/{room}/files`, `GET .../files/{id}`).

What `AgentTools.send_room_file` / `read_room_file` call (band-client-rest 0.0.46
`FileUploadResponse`/`Attachment`). The body is the file; `x-file-name`, `x-file-sha256`
(lowercase hex of the body) and `content-type` travel in headers. Identical bytes in one
room resolve to one record. A message lists files by `attachment_ids` (`messages.py`),
and the room's context then carries them as `attachments`.

Only the room's participants reach a room's files; any file of another room, an unknown
id and a room the caller is not in all answer 404 (a 403 would confirm the id exists).
Downloads are always attachments (`Content-Disposition`, `nosniff`) and honour one
`Range` span (206; 416 when it cannot be satisfied; an unparsable range gets the whole
file). Limits: `MAX_FILE_BYTES` per file and `MAX_TOTAL_BYTES` for all files (the bytes
live in the state file), both 413; names at most `MAX_NAME` characters.
"""

from __future__ import annotations

import base64
import hashlib
import re
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bandkit.emulator import ops, wire
from bandkit.emulator.api import data, endpoint
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import ApiFailure, invalid, not_found
from bandkit.emulator.state import StoredFile

agent_api = endpoint(Kind.AGENT)
MAX_FILE_BYTES = 1_000_000  # the SDK's own cap for band_send_room_file
MAX_TOTAL_BYTES = 16 * 1_000_000
MAX_NAME = 255
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CONTENT_TYPE = re.compile(r"^[\w.+-]+/[\w.+-]+$")
_RANGE = re.compile(r"^bytes=([0-9]{0,15})-([0-9]{0,15})$")  # longer: unparsable


async def _read_capped(request: Request) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FILE_BYTES:
        raise _too_large()
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise _too_large()
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large() -> ApiFailure:
    return ApiFailure(413, "payload_too_large", f"a file holds at most {MAX_FILE_BYTES} bytes")


def _name(request: Request) -> str:
    raw = request.headers.get("x-file-name", "")  # header bytes, read as latin-1
    try:
        name = raw.encode("latin-1").decode("utf-8").strip()
    except UnicodeError:
        raise invalid("/x-file-name", "must be UTF-8") from None
    if not name:
        raise ApiFailure(400, "bad_request", "the x-file-name header is required")
    if len(name) > MAX_NAME or any(c in name for c in "/\\\x00") or not name.isprintable():
        raise invalid("/x-file-name", f"must be a plain file name of at most {MAX_NAME} characters")
    return name


@agent_api
async def upload(request: Request, platform: Platform, principal: Principal) -> Response:
    room = ops.room_for_agent(platform.state, request.path_params["room_id"], principal.id)
    name = _name(request)
    claimed = request.headers.get("x-file-sha256", "")
    if not _SHA256.match(claimed):
        raise ApiFailure(400, "bad_request", "x-file-sha256 must be 64 lowercase hex digits")
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not _CONTENT_TYPE.match(content_type):
        raise invalid("/content-type", "must be a media type such as text/plain")
    raw = await _read_capped(request)
    if not raw:
        raise invalid("/body", "the file is empty")
    digest = hashlib.sha256(raw).hexdigest()
    if digest != claimed:
        raise invalid("/x-file-sha256", "does not match the body")
    state = platform.state
    for stored in state.files.values():
        if stored.room_id == room.id and stored.sha256 == digest:
            return data(wire.attachment(stored), status=200)
    if sum(f.size for f in state.files.values()) + len(raw) > MAX_TOTAL_BYTES:
        raise ApiFailure(413, "payload_too_large", "the emulator's file storage is full")
    stored = StoredFile(
        id=ops.new_uuid(),
        room_id=room.id,
        uploader_id=principal.id,
        name=name,
        content_type=content_type,
        sha256=digest,
        size=len(raw),
        data_b64=base64.b64encode(raw).decode("ascii"),
        inserted_at=platform.now(),
    )
    state.files[stored.id] = stored
    platform.commit()
    return data(wire.attachment(stored), status=201)


class _Unsatisfiable(Exception):
    def __init__(self, size: int) -> None:
        self.size = size


def _span(header: str | None, size: int) -> tuple[int, int] | None:
    """(first, last) of one `bytes=` span; None for no/unparsable range; 416 if outside."""
    match = _RANGE.match((header or "").strip())
    if match is None or match.groups() == ("", ""):
        return None
    first_raw, last_raw = match.groups()
    if first_raw == "":
        first, last = max(0, size - int(last_raw)), size - 1
        if int(last_raw) == 0:
            raise _Unsatisfiable(size)
    else:
        first = int(first_raw)
        last = min(int(last_raw), size - 1) if last_raw else size - 1
        if first >= size or (last_raw and int(last_raw) < first):
            raise _Unsatisfiable(size)
    return first, last


@agent_api
async def download(request: Request, platform: Platform, principal: Principal) -> Response:
    room = ops.room_for_agent(platform.state, request.path_params["room_id"], principal.id)
    stored = platform.state.files.get(request.path_params["file_id"])
    if stored is None or stored.room_id != room.id:
        raise not_found("file")
    raw = base64.b64decode(stored.data_b64)
    headers = {
        "content-disposition": f"attachment; filename*=UTF-8''{quote(stored.name, safe='')}",
        "x-content-type-options": "nosniff",
        "accept-ranges": "bytes",
    }
    try:
        span = _span(request.headers.get("range"), len(raw))
    except _Unsatisfiable as exc:
        return JSONResponse(
            "range not satisfiable",
            status_code=416,
            headers={"content-range": f"bytes */{exc.size}"},
        )
    if span is None:
        return Response(raw, media_type=stored.content_type, headers=headers)
    first, last = span
    headers["content-range"] = f"bytes {first}-{last}/{len(raw)}"
    return Response(
        raw[first : last + 1], status_code=206, media_type=stored.content_type, headers=headers
    )


CHAT = "/api/v1/agent/chats/{room_id}"
ROUTES = [
    Route(f"{CHAT}/files", upload, methods=["PUT"]),
    Route(f"{CHAT}/files/{{file_id}}", download, methods=["GET"]),
]
