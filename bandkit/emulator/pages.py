"""Read-only live pages: `/` lists rooms, `/rooms/{id}` shows a room's transcript live.

Pages need no key (the emulator binds loopback by default; say so when it does not).
Each page opens a Server-Sent Events feed: `/rooms/{id}/feed` first sends a `snapshot`
(room, participants, messages and events so far), then every change as it happens, so
the transcript updates without reload. `/feed` carries room additions and removals.
"""

from __future__ import annotations

import html
import json
from collections.abc import AsyncIterator
from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route

from bandkit.emulator import messages, wire
from bandkit.emulator.api import error_response, platform_of
from bandkit.emulator.channels import PAGE_ALL

ROOM_HTML = resources.files("bandkit.emulator").joinpath("static/room.html").read_text("utf-8")
SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}

INDEX = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Band emulator</title><style>
body{{font:15px/1.5 system-ui,sans-serif;margin:24px;color:#1d2330}}
li{{margin:4px 0}} .muted{{color:#6a7285}}</style></head><body>
<h1>Band emulator</h1><p class="muted">{summary}</p><ul id="rooms">{items}</ul>
<script>
"use strict";
const feed = new EventSource("/feed");
feed.onmessage = () => location.reload();
</script></body></html>"""


async def index(request: Request) -> Response:
    state = platform_of(request).state
    items = "".join(
        f'<li><a href="/rooms/{html.escape(r.id)}">{html.escape(r.title or r.id)}</a> '
        f'<span class="muted">{len(r.participants)} participants, '
        f"{len(state.room_messages.get(r.id, []))} messages</span></li>"
        for r in state.rooms.values()
    )
    summary = f"{len(state.rooms)} rooms, {len(state.agents)} agents. Pages are read-only."
    return HTMLResponse(INDEX.format(summary=summary, items=items or "<li>No rooms yet.</li>"))


async def room_page(request: Request) -> Response:
    if request.path_params["room_id"] not in platform_of(request).state.rooms:
        return error_response(404, "not_found", "chat room not found")
    return HTMLResponse(ROOM_HTML)


def _sse(line: str) -> str:
    return f"data: {line}\n\n"


async def room_feed(request: Request) -> Response:
    platform = platform_of(request)
    room_id = request.path_params["room_id"]
    room = platform.state.rooms.get(room_id)
    if room is None:
        return error_response(404, "not_found", "chat room not found")
    queue = platform.broker.subscribe_page(room_id)
    state = platform.state
    snapshot = {
        "room": wire.room(room),
        "participants": [wire.participant(state, p) for p in room.participants.values()],
        "messages": [wire.message(m) for m in messages.room_messages(state, room_id)],
    }

    async def stream() -> AsyncIterator[str]:
        try:
            yield _sse(json.dumps({"event": "snapshot", "payload": snapshot}))
            while (line := await queue.get()) is not None:
                yield _sse(line)
        finally:
            platform.broker.unsubscribe_page(room_id, queue)

    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


async def index_feed(request: Request) -> Response:
    platform = platform_of(request)
    queue = platform.broker.subscribe_page(PAGE_ALL)

    async def stream() -> AsyncIterator[str]:
        try:
            yield ": live\n\n"
            while (line := await queue.get()) is not None:
                yield _sse(line)
        finally:
            platform.broker.unsubscribe_page(PAGE_ALL, queue)

    return StreamingResponse(stream(), media_type="text/event-stream", headers=SSE_HEADERS)


ROUTES = [
    Route("/", index, methods=["GET"]),
    Route("/feed", index_feed, methods=["GET"]),
    Route("/rooms/{room_id}", room_page, methods=["GET"]),
    Route("/rooms/{room_id}/feed", room_feed, methods=["GET"]),
]
