"""Echo agent: the band-python-kit starter. Replies "echo: <text>" to every message.

The kit launcher execs this file with the project's own locked venv. It sets the
agent's identity and endpoints in the environment:

    BAND_AGENT_ID   the agent's id on the platform
    BAND_API_KEY    the key, or the sentinel `proxy-managed` when the sandbox proxy
                    injects the real one on the wire
    BAND_REST_URL   e.g. https://app.band.ai (or http://127.0.0.1:PORT for the emulator)
    BAND_WS_URL     e.g. wss://app.band.ai/api/v1/socket/websocket

SIGTERM (`sbx stop`, `docker stop`) and SIGINT stop the agent gracefully: the turn
in progress may finish (up to SHUTDOWN_TIMEOUT_S), then the connection closes.
To build a real agent, replace `EchoAdapter` with your own `SimpleAdapter` or a
framework adapter from `band.adapters` (see README.md).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from band import Agent
    from band.core.protocols import AgentToolsProtocol
    from band.core.types import PlatformMessage

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
SHUTDOWN_TIMEOUT_S = 20.0
REQUIRED_ENV = ("BAND_AGENT_ID", "BAND_API_KEY", "BAND_REST_URL", "BAND_WS_URL")

logger = logging.getLogger("echo-agent")


def origin(url: str) -> str:
    """scheme://host[:port] of an endpoint: a path may carry an access token, never log it."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


def read_settings() -> dict[str, str]:
    """The four BAND_* values; a missing one is a clear error, not a traceback."""
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        logger.error(
            "missing environment: %s (the kit launcher sets these; for a local run "
            "export them yourself)",
            ", ".join(missing),
        )
        raise SystemExit(2)
    return {name: os.environ[name] for name in REQUIRED_ENV}


def build_agent(settings: dict[str, str]) -> Agent:
    """Import band here, not at the top, so the first log line appears before the SDK loads."""
    from band import Agent
    from band.core.simple_adapter import SimpleAdapter

    class EchoAdapter(SimpleAdapter[object]):
        """Replies to each message with its text, mentioning the sender."""

        async def on_message(
            self,
            msg: PlatformMessage,
            tools: AgentToolsProtocol,
            history: object,
            participants_msg: str | None,
            contacts_msg: str | None,
            *,
            is_session_bootstrap: bool,
            room_id: str,
        ) -> None:
            logger.info("message in room %s from %s", room_id, msg.sender_id)
            await tools.send_message(f"echo: {msg.content}", mentions=[msg.sender_id])

    return Agent.create(
        adapter=EchoAdapter(),
        agent_id=settings["BAND_AGENT_ID"],
        api_key=settings["BAND_API_KEY"],
        rest_url=settings["BAND_REST_URL"],
        ws_url=settings["BAND_WS_URL"],
    )


async def serve(agent: Agent) -> None:
    """Run until SIGTERM/SIGINT (or a fatal agent error), then stop gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    await agent.start()
    logger.info("echo agent ready: %s", agent.agent_name or "(unnamed)")
    runner = asyncio.create_task(agent.run_forever(install_signal_handlers=False))
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            logger.info("shutdown signal received; stopping (up to %.0fs)", SHUTDOWN_TIMEOUT_S)
        else:
            runner.result()  # re-raises a fatal error from the agent
    finally:
        await agent.stop(timeout=SHUTDOWN_TIMEOUT_S)
        for task in (runner, stopper):
            task.cancel()
        await asyncio.gather(runner, stopper, return_exceptions=True)
    logger.info("echo agent stopped")


def main() -> int:
    level = os.environ.get("BAND_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    settings = read_settings()
    logger.info(
        "echo agent starting: agent %s, rest %s, ws %s (pid %d)",
        settings["BAND_AGENT_ID"],
        origin(settings["BAND_REST_URL"]),
        origin(settings["BAND_WS_URL"]),
        os.getpid(),
    )
    agent = build_agent(settings)
    try:
        asyncio.run(serve(agent))
    except Exception as exc:
        # One clear line; BAND_LOG_LEVEL=DEBUG adds the traceback.
        logger.error("echo agent failed: %s: %s", type(exc).__name__, exc)
        logger.debug("details", exc_info=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
