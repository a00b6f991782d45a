"""The emulator's server lifecycle: `Emulator.startup()` / `serve()` / `shutdown(timeout)`.

Web stack: Starlette on uvicorn (with httptools). All are locked dependencies, well
kept, and typed; Starlette gives plain routes for ~30 REST paths, a WebSocket route with the
denial-response extension (so an upgrade can be refused with the platform's JSON body:
409 `connection_conflict`), and streaming responses for the live pages. uvicorn gives a
server we can drive phase by phase (`startup(sockets=...)`, `shutdown()`) from our own
loop, WebSocket keepalive pings (which is how a frozen agent gets dropped), and TLS.
We bind the socket ourselves so a busy port is our `EmulatorError`, not uvicorn's
`sys.exit`, and we never run uvicorn's polling main loop: `serve()` awaits an event.
aiohttp would also fit, but it is not a dependency here.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

from bandkit import daemons
from bandkit.emulator import (
    access,
    api,
    control,
    pages,
    persistence,
    rest_agent,
    rest_agent_rooms,
    rest_bulk,
    rest_contacts,
    rest_files,
    rest_human,
    rest_human_memories,
    rest_memories,
    rest_tasks,
    tls,
    ws_endpoint,
)
from bandkit.emulator.api import error_response
from bandkit.emulator.context import Platform, utc_now
from bandkit.emulator.errors import EmulatorError, Phase
from bandkit.emulator.messages import MAX_DELIVERY_ATTEMPTS
from bandkit.emulator.persistence import Saver
from bandkit.emulator.state import EmulatorState, User

log = logging.getLogger("bandkit.emulator")

SHUTDOWN_CLOSE_CODE = 1001  # "going away": the SDK reconnects with backoff


@dataclass(frozen=True)
class EmulatorConfig:
    """Everything `python -m bandkit.emulator` can set; defaults live here only."""

    host: str = "127.0.0.1"
    port: int = 0
    state_file: Path | None = None
    tls: bool = False
    tls_dir: Path | None = None
    ws_ping_interval: float = 20.0
    ws_ping_timeout: float = 20.0
    shutdown_timeout: float = 5.0
    start_paused: float | None = 0.0  # hold agent traffic after start; None: until resumed
    access_log: bool = False
    extra_tls_hosts: tuple[str, ...] = field(default_factory=tuple)
    # More `Host` names clients use (name or name:port); the TLS names are allowed too.
    allow_hosts: tuple[str, ...] = field(default_factory=tuple)
    page_feeds_per_client: int = 8
    page_feeds_total: int = 32
    # Processing attempts per delivery before it is failed for good (see `messages.py`).
    max_delivery_attempts: int = MAX_DELIVERY_ATTEMPTS


def new_state() -> EmulatorState:
    now = utc_now()
    user = User(
        id=str(uuid.uuid4()),
        name="Local User",
        handle="local-user",
        email="user@band.local",
        inserted_at=now,
    )
    return EmulatorState(user=user)


async def _not_found(request: Request, exc: Exception) -> Response:
    """Every request no route answers: one `UNHANDLED <METHOD> <template>` line each."""
    platform: Platform = request.app.state.platform
    platform.unhandled += 1
    method = request.method if request.method.isalpha() else "?"
    log.warning("UNHANDLED %s %s", method[:16], api.route_template(request.url.path))
    return error_response(404, "not_found", f"no route for {request.method} {request.url.path}")


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("internal error on %s %s: %r", request.method, request.url.path, exc)
    return error_response(500, "internal_error", "the emulator failed on this request")


def _misdirected() -> Response:
    return error_response(421, "misdirected_request", "this server does not answer for that Host")


def build_app(platform: Platform) -> Starlette:
    routes = [
        *rest_bulk.ROUTES,  # before rest_human: its fixed paths would match `{id}` there
        *rest_human_memories.ROUTES,
        *rest_human.ROUTES,
        *rest_agent.ROUTES,
        *rest_agent_rooms.ROUTES,
        *rest_memories.ROUTES,
        *rest_tasks.ROUTES,
        *rest_files.ROUTES,
        *rest_contacts.ROUTES,
        *control.ROUTES,
        *ws_endpoint.ROUTES,
        *pages.ROUTES,
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={404: _not_found, 405: _not_found, Exception: _server_error},
        middleware=[
            Middleware(
                access.HostGuard,
                allowed=lambda: platform.pages.allowed,
                refusal=_misdirected,
            )
        ],
    )
    app.state.platform = platform
    return app


def _bind(host: str, port: int) -> socket.socket:
    try:
        return daemons.listen(host, port, backlog=512)
    except daemons.BindError as exc:
        raise EmulatorError(Phase.BIND, str(exc)) from None


class Emulator:
    """The local Band platform: one port, REST + Phoenix WebSocket + control API + pages."""

    def __init__(self, config: EmulatorConfig, *, user_key: str) -> None:
        self.config = config
        self._user_key = user_key
        self.ready = asyncio.Event()
        self._uvicorn = daemons.Uvicorn(log)
        self.rest_url = ""
        self.ws_url = ""
        self.ca_file: Path | None = None
        self.platform: Platform | None = None
        self._socket: socket.socket | None = None
        self._saver: Saver | None = None

    # --- phases -----------------------------------------------------------------------

    async def startup(self) -> None:
        """Load state, bind, start serving; sets `ready` when clients can connect."""
        config = self.config
        state = None
        if config.state_file is not None:
            persistence.check_writable(config.state_file)
            state = persistence.load(config.state_file)
        state = state or new_state()
        if config.state_file is not None:
            self._saver = Saver(config.state_file, state)
        pages = access.PageAccess(
            feeds_per_client=config.page_feeds_per_client, feeds_total=config.page_feeds_total
        )
        self.platform = Platform(state, self._user_key, self._saver, pages=pages)
        self.platform.drop_sockets = self.drop_sockets
        self.platform.max_attempts = config.max_delivery_attempts

        ssl_kwargs: dict[str, Any] = {}
        if config.tls:
            tls_dir = config.tls_dir or (
                config.state_file.parent / "emulator-tls"
                if config.state_file is not None
                else Path.cwd() / ".run" / "emulator-tls"
            )
            files = tls.ensure(tls_dir, [config.host, *config.extra_tls_hosts])
            self.ca_file = files.ca_cert
            ssl_kwargs = {"ssl_certfile": str(files.cert), "ssl_keyfile": str(files.key)}

        self._socket = _bind(config.host, config.port)
        port = self._socket.getsockname()[1]
        pages.allowed = access.allowed_hosts(
            config.host, port, tls=config.tls, extra=(*config.extra_tls_hosts, *config.allow_hosts)
        )
        pages.cookie_name = f"band_emulator_{port}"  # cookies ignore ports; names do not
        pages.secure = config.tls
        uv_config = uvicorn.Config(
            build_app(self.platform),
            lifespan="off",
            # httptools (C parser) instead of h11: about a third less emulator CPU per
            # request, which is most of its share of an echo round trip.
            http="httptools",
            ws="websockets-sansio",
            proxy_headers=False,  # nothing sits in front of it
            ws_ping_interval=config.ws_ping_interval,
            ws_ping_timeout=config.ws_ping_timeout,
            # Loopback traffic: compressing every frame costs both ends CPU for nothing.
            ws_per_message_deflate=False,
            timeout_graceful_shutdown=max(1, round(config.shutdown_timeout)),
            access_log=config.access_log,
            log_config=None,
            server_header=False,
            **ssl_kwargs,
        )
        await self._uvicorn.start(uv_config, self._socket)
        if self._saver is not None:
            self._saver.start()
            self._saver.mark_dirty()
        host = daemons.url_host(config.host)
        secure = "s" if config.tls else ""
        self.rest_url = f"http{secure}://{host}:{port}"
        self.ws_url = f"ws{secure}://{host}:{port}{ws_endpoint.SOCKET_PATH}"
        if config.start_paused is None or config.start_paused > 0:
            self.platform.pause(config.start_paused)
        self.ready.set()
        log.info("serving on %s", self.rest_url)

    async def serve(self) -> None:
        """Start, run until `stop()` is called, then shut down within the grace period."""
        await self.startup()
        try:
            await self._uvicorn.wait()
        finally:
            await self.shutdown(self.config.shutdown_timeout)

    def stop(self) -> None:
        self._uvicorn.stop()

    def login_url(self, lands: str | None = None) -> str:
        """A fresh one-time link that opens the room pages (see `access.py`), landing on
        `lands` (`/rooms/<id>`) when given."""
        assert self.platform is not None, "not started"
        target = ""
        if lands is not None:
            if access.landing(lands) is None:
                raise ValueError(f"a login cannot land on {lands!r}")
            target = f"&next={quote(lands, safe='/')}"
        return f"{self.rest_url}/login#token={self.platform.pages.mint_login_token()}{target}"

    def force(self) -> None:
        """Stop waiting for open connections during shutdown."""
        self._uvicorn.force()

    async def shutdown(self, timeout: float) -> None:
        """Close sockets (1001) and page feeds, stop uvicorn within `timeout`, save state."""
        if self.platform is not None:
            self.platform.resume()
            self.platform.broker.close_all(SHUTDOWN_CLOSE_CODE, "emulator shutting down")
        await self._uvicorn.shutdown(timeout)
        if self._saver is not None:
            await self._saver.stop()
            self._saver = None
        self.ready.clear()

    # --- faults -----------------------------------------------------------------------

    def drop_sockets(self) -> int:
        """Abort every WebSocket's TCP connection without a close frame; return how many."""
        server = self._uvicorn.server
        if server is None:
            return 0
        dropped = 0
        for connection in list(server.server_state.connections):
            if isinstance(connection, WebSocketsSansIOProtocol) and connection.transport:
                connection.transport.abort()
                dropped += 1
        log.warning("FAULT drop: aborted %d WebSocket connection(s)", dropped)
        return dropped
