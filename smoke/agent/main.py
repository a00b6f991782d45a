"""The sandbox smoke's agent: deterministic, no LLM, the real band SDK end to end.

A message that contains `marker:<token>` (12 lowercase hex) gets the reply
`sandbox-ack:<token>`, sent through the SDK's own tools (REST) with a mention of the
sender; every other message is marked handled and left unanswered. The message arrives
over the SDK's WebSocket, or from its `/next` resync after a reconnect, which is how a
message sent while the agent was cut off gets answered.

The kit launcher execs this file with the project's locked venv and sets BAND_AGENT_ID,
BAND_API_KEY (the `proxy-managed` placeholder: the credential proxy swaps the real key
in on the wire), BAND_REST_URL and BAND_WS_URL.

The agent logs each reconnect delay the SDK computes (`SDK reconnect delay <s>s (attempt
<n>)`: its backoff, observed, not changed), so the smoke's drills can report the backoff
they measured (the SDK's own DEBUG record of it drops the values).

`SMOKE_AGENT_WATCHDOG_S=<seconds>` shortens the SDK's heartbeat watchdog (30 s heartbeats,
a forced reconnect after 60 s without an ack) to that dead threshold, with heartbeats at
half of it, the SDK's own ratio. The silent-socket path is the same, only sooner, so the
smoke's sleep drill need not freeze the box for a minute. The SDK's `WebSocketClient` takes
a session policy but `Agent.create` does not pass one, so the two places that read it (the
heartbeat interval of each connection, the watchdog's deadline) are set here.

`SMOKE_AGENT_NO_RECONNECT=1` breaks recovery on purpose, for the smoke's own tests: the
SDK's reconnect policy is replaced by one that treats the first disconnect as terminal
(every disconnect counts as "rapid" and one suppresses reconnecting), so the agent
exits when its connection drops instead of coming back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from band import Agent

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
SHUTDOWN_TIMEOUT_S = 10.0
REQUIRED_ENV = ("BAND_AGENT_ID", "BAND_API_KEY", "BAND_REST_URL", "BAND_WS_URL")
NO_RECONNECT_ENV = "SMOKE_AGENT_NO_RECONNECT"
WATCHDOG_ENV = "SMOKE_AGENT_WATCHDOG_S"
MARKER_RE = re.compile(r"\bmarker:([0-9a-f]{12})\b")
ACK_PREFIX = "sandbox-ack:"
BACKOFF_LOG = "SDK reconnect delay"

logger = logging.getLogger("smoke-agent")


def ack_for(text: str) -> str | None:
    """`sandbox-ack:<token>` for a message carrying `marker:<token>`, else None."""
    found = MARKER_RE.search(text)
    return f"{ACK_PREFIX}{found.group(1)}" if found else None


def read_settings() -> dict[str, str]:
    missing = [name for name in REQUIRED_ENV if not os.environ.get(name)]
    if missing:
        logger.error("missing environment: %s (the kit launcher sets these)", ", ".join(missing))
        raise SystemExit(2)
    return {name: os.environ[name] for name in REQUIRED_ENV}


def log_backoff() -> None:
    """Log every reconnect delay the SDK's connection client computes (see the module
    docstring); the delay itself is returned unchanged."""
    from phoenix_channels_python_client.client import (  # type: ignore[import-untyped]
        PHXChannelsClient,
    )

    compute = PHXChannelsClient._compute_reconnect_delay

    def logged(self: Any, attempt: int) -> float:
        delay = float(compute(self, attempt))
        logger.info("%s %.2fs (attempt %d)", BACKOFF_LOG, delay, attempt)
        return delay

    PHXChannelsClient._compute_reconnect_delay = logged


def tune_watchdog(dead_threshold_s: float) -> None:
    """Heartbeats every `dead_threshold_s / 2`; a reconnect forced after `dead_threshold_s`
    without an ack (see the module docstring)."""
    from band.client.streaming import watchdog
    from phoenix_channels_python_client.client import PHXChannelsClient

    connect_init = PHXChannelsClient.__init__

    def tuned_init(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("heartbeat_interval_s") is not None:
            kwargs["heartbeat_interval_s"] = dead_threshold_s / 2
        connect_init(self, *args, **kwargs)

    def reset_deadline(self: Any) -> None:
        self._deadline = asyncio.get_running_loop().time() + dead_threshold_s

    PHXChannelsClient.__init__ = tuned_init
    watchdog.HeartbeatWatchdog.reset_deadline = reset_deadline  # type: ignore[method-assign]
    logger.info(
        "%s=%g: heartbeat every %gs, reconnect after %gs without an ack",
        WATCHDOG_ENV,
        dead_threshold_s,
        dead_threshold_s / 2,
        dead_threshold_s,
    )


def watchdog_setting() -> float | None:
    """The tuned dead threshold, or None for the SDK's own; a bad value stops the agent."""
    raw = os.environ.get(WATCHDOG_ENV, "")
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 2.0 <= value <= 600.0:
        logger.error("%s must be seconds between 2 and 600, got %r", WATCHDOG_ENV, raw)
        raise SystemExit(2)
    return value


def break_reconnect() -> None:
    """Make the SDK treat its first disconnect as terminal (see the module docstring)."""
    from band.client.streaming import client as streaming
    from phoenix_channels_python_client.client_types import (  # type: ignore[import-untyped]
        ReconnectPolicy,
    )

    streaming.RECONNECT_POLICY = ReconnectPolicy(
        reconnect_on_normal_close=True,
        rapid_disconnect_uptime_s=1e9,
        rapid_suppress_disconnect_count=1,
    )
    logger.warning("%s=1: reconnecting is disabled on purpose", NO_RECONNECT_ENV)


def build_agent(settings: dict[str, str]) -> Agent:
    from band import Agent
    from band.core.simple_adapter import SimpleAdapter

    class AckAdapter(SimpleAdapter[object]):
        async def on_message(
            self,
            msg: Any,
            tools: Any,
            history: object,
            participants_msg: str | None,
            contacts_msg: str | None,
            *,
            is_session_bootstrap: bool,
            room_id: str,
        ) -> None:
            reply = ack_for(str(msg.content or ""))
            if reply is None:
                logger.info("message %s in room %s has no marker; not answered", msg.id, room_id)
                return
            logger.info("marker message %s in room %s: answering %s", msg.id, room_id, reply)
            await tools.send_message(reply, mentions=[msg.sender_id])

    return Agent.create(
        adapter=AckAdapter(),
        agent_id=settings["BAND_AGENT_ID"],
        api_key=settings["BAND_API_KEY"],
        rest_url=settings["BAND_REST_URL"],
        ws_url=settings["BAND_WS_URL"],
    )


async def serve(agent: Agent) -> None:
    """Run until SIGTERM/SIGINT or a fatal agent error, then stop gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await agent.start()
    logger.info("smoke agent ready")
    runner = asyncio.create_task(agent.run_forever(install_signal_handlers=False))
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            logger.info("shutdown signal received; stopping")
        else:
            runner.result()  # re-raises a fatal error from the agent
            logger.error("the agent's connection ended for good; exiting")
    finally:
        await agent.stop(timeout=SHUTDOWN_TIMEOUT_S)
        for task in (runner, stopper):
            task.cancel()
        await asyncio.gather(runner, stopper, return_exceptions=True)
    logger.info("smoke agent stopped")


def main() -> int:
    level = os.environ.get("BAND_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
    log_backoff()
    settings = read_settings()
    logger.info("smoke agent starting: agent %s (pid %d)", settings["BAND_AGENT_ID"], os.getpid())
    threshold = watchdog_setting()
    if threshold is not None:
        tune_watchdog(threshold)
    if os.environ.get(NO_RECONNECT_ENV) == "1":
        break_reconnect()
    agent = build_agent(settings)
    try:
        asyncio.run(serve(agent))
    except Exception as exc:
        logger.error("smoke agent failed: %s: %s", type(exc).__name__, exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
