"""The WebSocket upgrade at `/api/v1/socket/websocket`: authenticate, arbitrate, serve.

Refusals are HTTP responses on the upgrade itself (the ASGI denial-response extension),
with the platform's JSON error body the SDK reads: 400 for a bad `vsn` or an `agent_id`
that does not match the key, 403 for a missing or unknown key, 409 `connection_conflict`
when `on_conflict=reject` meets a live connection. Otherwise a second connection for an
agent supersedes the first.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from bandkit.emulator.api import error_response
from bandkit.emulator.channels import Kind, Socket
from bandkit.emulator.context import Platform

log = logging.getLogger("bandkit.emulator.ws")

SOCKET_PATH = "/api/v1/socket/websocket"
CONFLICT_MESSAGE = (
    "An active connection already exists for this agent. "
    "Set on_conflict=supersede or omit on_conflict to take over."
)


async def _deny(websocket: WebSocket, status: int, code: str, message: str) -> None:
    await websocket.send_denial_response(error_response(status, code, message))


async def socket_endpoint(websocket: WebSocket) -> None:
    platform: Platform = websocket.app.state.platform
    query = websocket.query_params
    if query.get("vsn", "2.0.0") != "2.0.0":
        await _deny(websocket, 400, "bad_request", "only Phoenix serializer vsn=2.0.0 is supported")
        return
    # Header only: a key in the query string would end up in access logs.
    key = websocket.headers.get("x-api-key")
    principal = platform.authenticate(key)
    if principal is None:
        await _deny(websocket, 403, "unauthorized", "missing or invalid API key")
        return
    await platform.gate.wait()
    if principal.kind is Kind.AGENT:
        claimed = query.get("agent_id")
        if claimed and claimed != principal.id:
            await _deny(websocket, 400, "bad_request", "agent_id does not match the API key")
            return
        if platform.broker.is_online(principal.id):
            if query.get("on_conflict") == "reject":
                await _deny(websocket, 409, "connection_conflict", CONFLICT_MESSAGE)
                return
            platform.broker.supersede(principal.id)
    await websocket.accept()
    sock = Socket(websocket, principal, platform.gate)
    platform.broker.attach(sock)
    writer = asyncio.create_task(sock.run_writer(), name=f"ws-writer-{principal.id}")
    log.info("%s %s connected", principal.kind.value, principal.id)
    try:
        while True:
            event = await websocket.receive()
            if event["type"] == "websocket.disconnect":
                break
            text = event.get("text")
            if text is None:
                log.warning("ignored a binary frame from %s %s", principal.kind.value, principal.id)
                continue
            await platform.gate.wait()
            platform.broker.handle(sock, text, platform.authorize)
    finally:
        platform.broker.detach(sock)
        writer.cancel()
        await asyncio.gather(writer, return_exceptions=True)
        log.info("%s %s disconnected", principal.kind.value, principal.id)


ROUTES = [WebSocketRoute(SOCKET_PATH, socket_endpoint)]
