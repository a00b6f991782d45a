"""A demo meeting agent: the real band-sdk Agent with the scripted brain (``brain.py``).

The kit launcher execs this file with the workspace's own locked venv and sets
``BAND_AGENT_ID``, ``BAND_API_KEY`` (the sentinel ``proxy-managed``: the sandbox proxy puts
the real key on the wire), ``BAND_REST_URL`` and ``BAND_WS_URL``. Who this agent is and what
it says come from ``script.json``, which the demo stages beside this file (``uv run invoke
demo.up``); ``prompt.md`` is the persona the LLM brains use.

This file is the one agent program of the three roles: the demo stages it as ``main.py``,
with ``brain.py``, into each role's workspace copy (``agents/<role>/`` holds what differs
per role: band.yaml, the locked project, the persona). SIGTERM and SIGINT
stop the agent within ``SHUTDOWN_TIMEOUT_S``; "demo agent ready" on stderr means it is
connected (the demo waits for that line).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from pathlib import Path

# A sibling file when the launcher runs this one; mypy sees the tree as a package.
from brain import SCRIPT_FILE, Script, ScriptError, build_adapter  # type: ignore[import-not-found]

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


async def serve(script: Script, settings: dict[str, str]) -> None:
    from band import Agent

    agent = Agent.create(
        adapter=build_adapter(script),
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
    logger.info("%s: %s (%s, scenario script loaded)", READY_LINE, script.name, script.role)
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
    try:
        script = Script.load(Path(__file__).resolve().parent / SCRIPT_FILE)
    except ScriptError as exc:
        logger.error("%s", exc)
        return 2
    settings = read_settings()
    logger.info(
        "demo agent starting: %s, agent %s (pid %d)",
        script.name,
        settings["BAND_AGENT_ID"],
        os.getpid(),
    )
    try:
        asyncio.run(serve(script, settings))
    except Exception as exc:
        logger.error("demo agent failed: %s: %s", type(exc).__name__, exc)
        logger.debug("details", exc_info=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
