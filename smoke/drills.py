"""The interruptions, drilled automatically: network cut, sleep/wake, daemon restart,
platform restart. Each measures its timings, proves nothing was lost, records one probe
and one observation, and returns a `DrillResult`.

Common shape: cut → send a marker mention while the agent is cut off (the human API
still answers) → hold the outage for its planned length (a deliberate duration, the
only sleep here) → restore → wait (deadline) until the platform lists the agent online
again (`reconnect_s`, from the restore) → wait for the ack of the marker sent during the
outage (`reply_s`, from the restore: nothing lost) → a fresh round trip (the label's
probe). Every wait polls a condition with a deadline.

This module holds the two drills that do not depend on the runtime:

- **sleep**: the box frozen (`Box.frozen`: SIGSTOP of the box's process tree on local,
  `docker pause` on docker) past the SDK's heartbeat watchdog, then thawed;
- **platform**: the local platform is stopped (`service.down`: sockets closed,
  connections refused), then started again from its state file on the same port.

The network cut and the daemon restart are the runtime's own: `smoke.local_drills`
(the platform's socket drop, the box killed and relaunched) and `smoke.docker_drills`
(`docker network disconnect`/`connect`, a restart of the Docker daemon itself).

What every runtime shares lives beside this module and is re-exported here (the
runtimes' drills and the orchestration use it as `dr.*`): `smoke.drill_plan` (the
`Drill` names, their labels, the planned lengths, `Timings`, `DrillResult`,
`DrillError`, `parse`), `smoke.drill_box` (the sandbox handle `Box`, whose `frozen()`
each runtime implements, and `AgentLog`), `smoke.drill_context` (the context and its
waits) and `smoke.drill_recovery` (the recovery check `recover`, and the daemon drill's
ending with its documented recovery, `reprovision`: reap the dead agent and room,
provision anew).

The sleep drill's default freeze is the SDK's own `dead_threshold_s` (read from
`band_sdk_core.SessionPolicy.default()`, 60 s) plus `FREEZE_MARGIN_S`, so the
watchdog's deadline has passed when the box thaws, as after a real host sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from smoke.drill_box import AgentLog, Box
from smoke.drill_context import DrillContext, hold_until, offline_within
from smoke.drill_plan import (
    DAEMON_DOWN_S,
    FREEZE_MARGIN_S,
    LABELS,
    NETWORK_OUTAGE_S,
    PLATFORM_DOWN_S,
    RECONNECT_TIMEOUT_S,
    Drill,
    DrillError,
    DrillResult,
    Timings,
    default_freeze_s,
    parse,
    sdk_watchdog,
)
from smoke.drill_recovery import after_daemon, observe, recover
from smoke.target import TargetError

__all__ = [  # what the rest of the smoke uses from here
    "DAEMON_DOWN_S",
    "FREEZE_MARGIN_S",
    "LABELS",
    "NETWORK_OUTAGE_S",
    "PLATFORM_DOWN_S",
    "RECONNECT_TIMEOUT_S",
    "SHARED",
    "AgentLog",
    "Box",
    "Drill",
    "DrillContext",
    "DrillError",
    "DrillResult",
    "Runner",
    "Timings",
    "after_daemon",
    "default_freeze_s",
    "hold_until",
    "observe",
    "offline_within",
    "parse",
    "platform_restart",
    "recover",
    "sdk_watchdog",
    "sleep_wake",
]


def sleep_wake(ctx: DrillContext) -> DrillResult:
    t = Timings()
    _, dead_threshold = sdk_watchdog()
    notes = [f"froze the box for {ctx.freeze_s:g}s (SDK heartbeat watchdog: {dead_threshold:g}s)"]
    mark = len(ctx.box.log_lines())
    with ctx.box.frozen() as what:
        cut = time.monotonic()
        notes.append(what)
        token = ctx.send_outage_marker()
        thaw_at = cut + ctx.freeze_s
        t.offline_after_s = offline_within(ctx, cut, thaw_at)
        hold_until(thaw_at)
    restored = time.monotonic()
    t.outage_s = restored - cut
    if t.offline_after_s is None:
        notes.append("the platform kept the frozen agent's socket open")
    ok = recover(ctx, Drill.SLEEP, token, restored, t, notes)
    seen = AgentLog.since(ctx.box, mark)
    notes += seen.notes()
    if ok:
        observe(ctx, Drill.SLEEP, t, "; ".join(notes))
    return DrillResult(Drill.SLEEP, ok, t, notes, seen.backoff_s)


def platform_restart(ctx: DrillContext) -> DrillResult:
    t = Timings()
    notes: list[str] = []
    mark = len(ctx.box.log_lines())
    cut = time.monotonic()
    try:
        ctx.target.stop_platform()
    except TargetError as exc:
        raise DrillError(str(exc)) from None
    notes.append(f"platform stopped in {time.monotonic() - cut:.1f}s")
    hold_until(cut + ctx.platform_down_s)
    ctx.target.start_platform()
    restored = time.monotonic()
    t.outage_s = restored - cut
    token = ctx.send_outage_marker()  # the platform is back; the agent is not yet
    still_offline = not ctx.is_online()
    notes.append(
        "the outage message was sent right after the restart, "
        + ("while the agent was still offline" if still_offline else "the agent was already back")
    )
    ok = recover(ctx, Drill.PLATFORM, token, restored, t, notes)
    seen = AgentLog.since(ctx.box, mark)
    notes += seen.notes()[1:]
    if ok:
        observe(ctx, Drill.PLATFORM, t, "; ".join(notes))
    return DrillResult(Drill.PLATFORM, ok, t, notes, seen.backoff_s)


Runner = Callable[[DrillContext], DrillResult]
SHARED: dict[Drill, Runner] = {Drill.SLEEP: sleep_wake, Drill.PLATFORM: platform_restart}
