"""The stub's HTTP server: the uvicorn lifecycle of the local model endpoint.

Lifecycle as the emulator's: we bind the socket ourselves (a busy port is an
`LLMStubError`), drive uvicorn's `startup` / `shutdown` from our own loop, set `ready`
once clients can connect, and stop within a bounded grace period. The app is
`routes.build_app`; a model request's pipeline is `pipeline.answer`; error shapes are in
`refusals`; what the routes share (`StubConfig`, `Stub`) is in `state`. The names other
code imports from here are re-exported.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import uvicorn

from bandkit import daemons
from bandkit.llm.errors import LLMStubError
from bandkit.llm.keys import KeyRing
from bandkit.llm.pipeline import AGENT_HEADER, CHAT, MESSAGES, RESPONSES, Api
from bandkit.llm.refusals import Refusal
from bandkit.llm.routes import ROUTES, build_app
from bandkit.llm.script import ScriptSet
from bandkit.llm.state import Entry, Stub, StubConfig

__all__ = [
    "AGENT_HEADER",
    "CHAT",
    "MESSAGES",
    "RESPONSES",
    "ROUTES",
    "Api",
    "Entry",
    "LLMStub",
    "Refusal",
    "Stub",
    "StubConfig",
    "build_app",
    "run_until_signalled",
]

log = logging.getLogger("bandkit.llm")


def _bind(host: str, port: int) -> socket.socket:
    try:
        return daemons.listen(host, port, backlog=256)
    except daemons.BindError as exc:
        raise LLMStubError(str(exc)) from None


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):  # noqa: S104 - rendering, not binding
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


class LLMStub:
    """The local model endpoint: one port, the Anthropic and OpenAI wire APIs, the turns."""

    def __init__(self, config: StubConfig, *, scripts: ScriptSet, keys: KeyRing) -> None:
        self.config = config
        self.stub = Stub(config, scripts, keys)
        self.ready = asyncio.Event()
        self._stop = asyncio.Event()
        self.url = ""
        self._server: uvicorn.Server | None = None

    async def startup(self) -> None:
        sock = _bind(self.config.host, self.config.port)
        port = sock.getsockname()[1]
        uv_config = uvicorn.Config(
            build_app(self.stub),
            lifespan="off",
            http="httptools",
            proxy_headers=False,
            timeout_graceful_shutdown=max(1, round(self.config.shutdown_timeout)),
            access_log=self.config.access_log,
            log_config=None,
            server_header=False,
        )
        self._server = uvicorn.Server(uv_config)
        uv_config.load()
        self._server.lifespan = uv_config.lifespan_class(uv_config)
        await self._server.startup(sockets=[sock])
        self.url = f"http://{_url_host(self.config.host)}:{port}"
        self.ready.set()
        log.info("serving on %s (agents: %s)", self.url, ", ".join(self.stub.scripts.agents))

    async def serve(self) -> None:
        await self.startup()
        try:
            await self._stop.wait()
        finally:
            await self.shutdown(self.config.shutdown_timeout)

    def stop(self) -> None:
        self._stop.set()

    def force(self) -> None:
        if self._server is not None:
            self._server.force_exit = True

    async def shutdown(self, timeout: float) -> None:
        server = self._server
        if server is not None:
            server.config.timeout_graceful_shutdown = max(1, round(timeout))
            try:
                await asyncio.wait_for(server.shutdown(), timeout=timeout + 1.0)
            except TimeoutError:
                log.error("shutdown did not finish within %.1f s; leaving the rest", timeout)
            self._server = None
        self.stub.journal.close()
        self.ready.clear()


run_until_signalled = daemons.run_until_signalled
