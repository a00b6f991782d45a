"""What a drill runs with (`DrillContext`: the run, the platform, the box, the planned
lengths and timeouts) and its waits: the agent's online flag polled with a deadline
(`DrillContext.wait_online`, `offline_within`) and the deliberate outage (`hold_until`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bandkit.kit.platform_api import PLATFORM_ERRORS
from bandkit.runtimes.base import SandboxStatus
from smoke import roundtrip as rt
from smoke.context import Layout, Recorder
from smoke.drills.box import Box
from smoke.drills.plan import (
    DAEMON_DOWN_S,
    NETWORK_OUTAGE_S,
    PLATFORM_DOWN_S,
    RECONNECT_TIMEOUT_S,
    default_freeze_s,
    sdk_watchdog,
)
from smoke.target import Target

ONLINE_POLL_S = 0.05
ALIVE_CHECK_S = 1.0  # the box's liveness (a /proc scan) is checked less often than online


@dataclass
class DrillContext:
    rec: Recorder
    layout: Layout
    target: Target
    box: Box
    runtime: str
    agent_env: dict[str, str] = field(default_factory=dict)
    reply_timeout_s: float = rt.REPLY_TIMEOUT_S
    reconnect_timeout_s: float = RECONNECT_TIMEOUT_S
    network_outage_s: float = NETWORK_OUTAGE_S
    freeze_s: float = field(default_factory=default_freeze_s)
    watchdog_s: float = field(default_factory=lambda: sdk_watchdog()[1])  # the agent's
    daemon_down_s: float = DAEMON_DOWN_S
    platform_down_s: float = PLATFORM_DOWN_S
    relaunch: bool = True  # False breaks the daemon drill's recovery on purpose (tests)
    image: str | None = None  # the docker runtime's image (re-provisioning uses it too)
    heal_after_s: float | None = None  # docker network drill: the kit's health check
    log: Callable[[str], None] = print

    @property
    def room(self) -> str:
        return self.rec.state.room_id

    @property
    def agent_id(self) -> str:
        return self.rec.state.agent_id

    def is_online(self) -> bool:
        """The agent's online flag; False while the platform itself cannot answer (the
        platform drill takes it down). Any other error is a bug and surfaces at once."""
        try:
            return rt.run_async(lambda: rt.online(self.target, self.room, self.agent_id))
        except PLATFORM_ERRORS:
            return False

    def wait_online(
        self, want: bool, timeout_s: float, *, alive: Callable[[], bool] | None = None
    ) -> float | None:
        """Seconds until the agent's online flag is `want`, None at the deadline (or when
        `alive()`, checked every ALIVE_CHECK_S, says the box died: no point waiting)."""
        started = time.monotonic()
        next_alive_check = started + ALIVE_CHECK_S
        while True:
            if self.is_online() is want:
                return time.monotonic() - started
            now = time.monotonic()
            if now - started > timeout_s:
                return None
            if want and alive is not None and now >= next_alive_check:
                if not alive():
                    return None
                next_alive_check = now + ALIVE_CHECK_S
            time.sleep(ONLINE_POLL_S)

    def send_outage_marker(self) -> str:
        token = rt.new_token()
        state = self.rec.state
        rt.run_async(
            lambda: rt.send_marker(self.target, self.room, self.agent_id, state.agent_name, token)
        )
        return token

    def box_alive(self) -> bool:
        return self.box.status() is SandboxStatus.RUNNING


def hold_until(deadline: float, check: Callable[[], None] | None = None) -> None:
    """The deliberate outage: wait until `deadline`, calling `check` about twice a second."""
    while (left := deadline - time.monotonic()) > 0:
        if check is not None:
            check()
        time.sleep(min(0.5, left))


def offline_within(ctx: DrillContext, cut: float, until: float) -> float | None:
    """Seconds from `cut` until the platform listed the agent offline (None: not by `until`)."""
    waited = ctx.wait_online(False, max(0.0, until - time.monotonic()))
    return None if waited is None else time.monotonic() - cut
