"""The interruptions, drilled automatically: network cut, sleep/wake, daemon restart,
platform restart. Each measures its timings, proves nothing was lost, records one probe
and one observation, and returns a `DrillResult`.

Common shape: cut → send a marker mention while the agent is cut off (the human API
still answers) → hold the outage for its planned length (a deliberate duration, the
only sleep here) → restore → wait (deadline) until the platform lists the agent online
again (`reconnect_s`, from the restore) → wait for the ack of the marker sent during the
outage (`reply_s`, from the restore: nothing lost) → a fresh round trip (the label's
probe). Every wait polls a condition with a deadline.

- `plan`: the `Drill` names and `parse`, their labels, the planned lengths, the SDK's
  watchdog figures (`default_freeze_s`), `Timings`, `DrillResult`, `DrillError`;
- `box`: the sandbox handle `Box` (each runtime implements `frozen`) and `AgentLog`;
- `context`: `DrillContext` and its waits (`offline_within`, `hold_until`);
- `recovery`: the recovery check `recover`, the observation, and the daemon drill's
  ending (`after_daemon`) with its documented recovery (`reprovision`);
- `shared`: the drills every runtime runs (sleep/wake, platform restart: `SHARED`);
- `local`: the local runtime's box (`LocalBox`) and its network and daemon drills;
- `docker`: the docker runtime's box (`DockerBox`) and its network and daemon drills.

The runtime modules are imported as `smoke.drills.local` / `smoke.drills.docker`; the
names below are what the rest of the smoke uses.
"""

from __future__ import annotations

from smoke.drills.box import AgentLog, Box
from smoke.drills.context import DrillContext
from smoke.drills.plan import (
    AGENT_WATCHDOG_ENV,
    DAEMON_DOWN_S,
    FREEZE_MARGIN_S,
    LABELS,
    NETWORK_OUTAGE_S,
    PLATFORM_DOWN_S,
    RECONNECT_TIMEOUT_S,
    Drill,
    DrillError,
    DrillResult,
    default_freeze_s,
    parse,
    sdk_watchdog,
)

__all__ = [
    "AGENT_WATCHDOG_ENV",
    "DAEMON_DOWN_S",
    "FREEZE_MARGIN_S",
    "LABELS",
    "NETWORK_OUTAGE_S",
    "PLATFORM_DOWN_S",
    "RECONNECT_TIMEOUT_S",
    "AgentLog",
    "Box",
    "Drill",
    "DrillContext",
    "DrillError",
    "DrillResult",
    "default_freeze_s",
    "parse",
    "sdk_watchdog",
]
