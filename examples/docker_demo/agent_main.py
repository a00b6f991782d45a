"""A demo meeting agent: the real band-sdk Agent with the scripted brain (``brain.py``),
or, when ``script.json`` says ``"brains": "stub"`` or ``"real"``, with band-sdk's real
framework adapter for the role (``brains_frameworks.py``: Claude SDK, Codex, CrewAI).

The kit launcher execs this file with the workspace's own locked venv and sets
``BAND_AGENT_ID``, ``BAND_API_KEY`` (the sentinel ``proxy-managed``: the sandbox proxy puts
the real key on the wire), ``BAND_REST_URL`` and ``BAND_WS_URL``. Who this agent is and what
it says come from ``script.json``, which the demo stages beside this file (``uv run invoke
demo.up``); ``prompt.md`` is the persona the LLM brains use.

This file is the one agent program of the three roles: the demo stages it as ``main.py``,
with ``brain.py`` and ``brains_frameworks.py``, into each role's workspace copy
(``agents/<role>/`` holds what differs per role: band.yaml, the locked project, the
persona). SIGTERM and SIGINT
stop the agent within ``SHUTDOWN_TIMEOUT_S``; "demo agent ready" on stderr means it is
connected (the demo waits for that line).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

# A sibling file when the launcher runs this one; mypy sees the tree as a package.
from brain import SCRIPT_FILE, BrainScriptError, Script, build_adapter  # type: ignore[import-not-found]
from brains_frameworks import (  # type: ignore[import-not-found]
    BrainsError,
    build_framework_adapter,
    persona,
    prepare,
    remove_home,
)

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
READY_LINE = "demo agent ready"
SHUTDOWN_TIMEOUT_S = 3.0
REQUIRED_ENV = ("BAND_AGENT_ID", "BAND_API_KEY", "BAND_REST_URL", "BAND_WS_URL")

logger = logging.getLogger("demo-agent")


def read_settings() -> dict[str, str]:
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        logger.error("missing environment: %s (the kit launcher sets these)", ", ".join(missing))
        raise SystemExit(2)
    return {name: os.environ[name] for name in REQUIRED_ENV}


def brains_of(path: Path) -> str:
    """`scripted` (the default), `stub` or `real`: what script.json asks for."""
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("brains", "scripted")
    except (OSError, ValueError, AttributeError):
        return "scripted"  # Script.load reports the problem
    return str(value)


def adapter_for(script: Script, brains: str) -> Any:
    if brains == "scripted":
        return build_adapter(script)
    here = Path(__file__).resolve().parent
    return build_framework_adapter(script.role, persona(here), dict(os.environ))


async def serve(script: Script, settings: dict[str, str], brains: str = "scripted") -> None:
    from band import Agent

    agent = Agent.create(
        adapter=adapter_for(script, brains),
        agent_id=settings["BAND_AGENT_ID"],
        api_key=settings["BAND_API_KEY"],
        rest_url=settings["BAND_REST_URL"],
        ws_url=settings["BAND_WS_URL"],
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await agent.start()
    logger.info("%s: %s (%s, %s brains)", READY_LINE, script.name, script.role, brains)
    runner = asyncio.create_task(agent.run_forever(install_signal_handlers=False))
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not stop.is_set():
            runner.result()  # re-raises a fatal error from the agent
    finally:
        await agent.stop(timeout=SHUTDOWN_TIMEOUT_S)
        for task in (runner, stopper):
            task.cancel()
        await asyncio.gather(runner, stopper, return_exceptions=True)
    logger.info("demo agent stopped")


def main() -> int:
    logging.basicConfig(
        level=os.environ.get("BAND_LOG_LEVEL", "INFO").upper(), format=LOG_FORMAT, stream=sys.stderr
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns the rest
    # The codex CLI's own stderr (why it exited, if it does) is logged at DEBUG only.
    logging.getLogger("band.integrations.codex.stdio_client").setLevel(logging.DEBUG)
    path = Path(__file__).resolve().parent / SCRIPT_FILE
    try:
        script = Script.load(path)
    except BrainScriptError as exc:
        logger.error("%s", exc)
        return 2
    settings = read_settings()
    brains = brains_of(path)
    home = None
    if brains != "scripted":
        try:
            home = prepare(os.environ, script.role)
        except BrainsError as exc:
            logger.error("%s", exc)
            return 2
    logger.info(
        "demo agent starting: %s, agent %s (pid %d)",
        script.name,
        settings["BAND_AGENT_ID"],
        os.getpid(),
    )
    try:
        asyncio.run(serve(script, settings, brains))
    except Exception as exc:
        logger.error("demo agent failed: %s: %s", type(exc).__name__, exc)
        logger.debug("details", exc_info=True)
        return 1
    finally:
        remove_home(home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
