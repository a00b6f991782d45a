"""What a drill is: the `Drill` names (in the order they run, `parse` reads a selection),
the probe label and observation key each records, the planned outage lengths, the SDK's
heartbeat watchdog figures the sleep drill's freeze is derived from (`default_freeze_s`:
its `dead_threshold_s`, or the smoke agent's tuned one, plus `FREEZE_MARGIN_S`), and what
a drill measures and returns (`Timings`, `DrillResult`). `DrillError`: a drill that could
not be carried out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from bandkit.errors import BandkitError
from smoke.state import Label, ObservationKey

RECONNECT_TIMEOUT_S = 60.0
NETWORK_OUTAGE_S = 8.0
DAEMON_DOWN_S = 2.0
PLATFORM_DOWN_S = 3.0
FREEZE_MARGIN_S = 5.0


class Drill(StrEnum):
    NETWORK = "network"
    SLEEP = "sleep"
    DAEMON = "daemon"
    PLATFORM = "platform"


LABELS = {
    Drill.NETWORK: Label.AFTER_WIFI_RECONNECT,
    Drill.SLEEP: Label.AFTER_SLEEP_WAKE,
    Drill.DAEMON: Label.AFTER_DAEMON_RESTART,
    Drill.PLATFORM: Label.AFTER_PLATFORM_RESTART,
}
OBSERVATIONS = {
    Drill.NETWORK: ObservationKey.NETWORK_CUT,
    Drill.SLEEP: ObservationKey.SLEEP_WAKE,
    Drill.DAEMON: ObservationKey.DAEMON_RESTART,
    Drill.PLATFORM: ObservationKey.PLATFORM_RESTART,
}


class DrillError(BandkitError):
    """A drill could not be carried out (not: the agent failed to recover)."""


def sdk_watchdog() -> tuple[float, float]:
    """(heartbeat interval, dead threshold) in seconds: the SDK's own session policy."""
    from band_sdk_core import SessionPolicy

    policy = SessionPolicy.default()
    return float(policy.heartbeat_interval_s), float(policy.dead_threshold_s)


# The smoke agent's knob for its heartbeat watchdog (smoke/agent/main.py reads it): the dead
# threshold in seconds, heartbeats at half of it. Unset: the SDK's own figures.
AGENT_WATCHDOG_ENV = "SMOKE_AGENT_WATCHDOG_S"


def default_freeze_s(watchdog_s: float | None = None) -> float:
    """Longer than the agent's watchdog (`watchdog_s`, else the SDK's dead threshold)."""
    return (sdk_watchdog()[1] if watchdog_s is None else watchdog_s) + FREEZE_MARGIN_S


@dataclass
class Timings:
    outage_s: float = 0.0  # cut -> restore
    offline_after_s: float | None = None  # cut -> the platform listed the agent offline
    reconnect_s: float | None = None  # restore -> online again
    reply_s: float | None = None  # restore -> ack of the marker sent during the outage
    probe_s: float | None = None  # the fresh round trip after recovery

    def describe(self) -> str:
        def sec(value: float | None) -> str:
            return "never" if value is None else f"{value:.2f}s"

        parts = [f"outage {self.outage_s:.1f}s"]
        if self.offline_after_s is not None:
            parts.append(f"platform saw the agent offline {self.offline_after_s:.1f}s in")
        parts += [
            f"reconnect {sec(self.reconnect_s)} after restore",
            f"outage message answered {sec(self.reply_s)} after restore",
            f"fresh round trip {sec(self.probe_s)}",
        ]
        return ", ".join(parts)


@dataclass
class DrillResult:
    drill: Drill
    passed: bool
    timings: Timings
    notes: list[str] = field(default_factory=list)
    backoff_s: list[float] = field(default_factory=list)  # the SDK's reconnect waits seen


def parse(spec: str) -> list[Drill]:
    """`all` or a comma list of drill names, in the fixed order they run in."""
    if spec.strip() in ("", "all"):
        return list(Drill)
    names = {part.strip() for part in spec.split(",") if part.strip()}
    unknown = sorted(names - {d.value for d in Drill})
    if unknown:
        choices = ", ".join(d.value for d in Drill)
        raise DrillError(f"unknown drill(s) {', '.join(unknown)}; choose all or {choices}")
    return [d for d in Drill if d.value in names]
