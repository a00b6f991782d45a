"""The stub's HTTP server: the uvicorn lifecycle of the local model endpoint.

Lifecycle as the emulator's: we bind the socket ourselves (a busy port is an
`LLMStubError`), drive uvicorn's `startup` / `shutdown` from our own loop, set `ready`
once clients can connect, and stop within a bounded grace period. The app is
`routes.build_app`; a model request's pipeline is `pipeline.answer`; error shapes are in
`refusals`; what the routes share (`StubConfig`, `Stub`) is in `state`.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import uvicorn

from bandkit import daemons
from bandkit.llm.errors import LLMStubError
from bandkit.llm.keys import KeyRing
from bandkit.llm.routes import build_app
from bandkit.llm.script import ScriptSet
from bandkit.llm.state import Stub, StubConfig

log = logging.getLogger("bandkit.llm")


def _bind(host: str, port: int) -> socket.socket:
    try:
        return daemons.listen(host, port, backlog=256)
    except daemons.BindError as exc:
        raise LLMStubError(str(exc)) from None


class LLMStub:
    """The local model endpoint: one port, the Anthropic and OpenAI wire APIs, the turns."""

    def __init__(self, config: StubConfig, *, scripts: ScriptSet, keys: KeyRing) -> None:
        self.config = config
        self.stub = Stub(config, scripts, keys)
        self.ready = asyncio.Event()
        self._uvicorn = daemons.Uvicorn(log)
        self.url = ""

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
        await self._uvicorn.start(uv_config, sock)
        self.stub.pages.cookie_name = f"bandkit_llm_stub_{port}"  # cookies ignore ports
        self.url = f"http://{daemons.url_host(self.config.host)}:{port}"
        self.ready.set()
        log.info("serving on %s (agents: %s)", self.url, ", ".join(self.stub.scripts.agents))

    async def serve(self) -> None:
        await self.startup()
        try:
            await self._uvicorn.wait()
        finally:
            await self.shutdown(self.config.shutdown_timeout)

    def login_url(self) -> str:
        """A fresh one-time login link for the pages (stdout only: never log it)."""
        return f"{self.url}/login#token={self.stub.pages.mint_login_token()}"

    def stop(self) -> None:
        self._uvicorn.stop()

    def force(self) -> None:
        """Stop waiting for open connections during shutdown."""
        self._uvicorn.force()

    async def shutdown(self, timeout: float) -> None:
        await self._uvicorn.shutdown(timeout)
        self.stub.journal.close()
        self.ready.clear()
