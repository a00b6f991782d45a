"""The drills that do not depend on the runtime:

- **sleep**: the box frozen (`Box.frozen`: SIGSTOP of the box's process tree on local,
  `docker pause` on docker) past the SDK's heartbeat watchdog, then thawed;
- **platform**: the local platform is stopped (`service.down`: sockets closed,
  connections refused), then started again from its state file on the same port.

The network cut and the daemon restart are the runtime's own (`smoke.drills.local`,
`smoke.drills.docker`); `SHARED` is what each runtime's `RUNNERS` adds them to.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from smoke.drills.box import AgentLog
from smoke.drills.context import DrillContext, hold_until, offline_within
from smoke.drills.plan import Drill, DrillError, DrillResult, Timings
from smoke.drills.recovery import observe, recover
from smoke.target import TargetError


def sleep_wake(ctx: DrillContext) -> DrillResult:
    t = Timings()
    notes = [f"froze the box for {ctx.freeze_s:g}s (SDK heartbeat watchdog: {ctx.watchdog_s:g}s)"]
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
