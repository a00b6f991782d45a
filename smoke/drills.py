"""The interruptions, drilled automatically: network cut, sleep/wake, daemon restart,
platform restart. Each measures its timings, proves nothing was lost, records one probe
and one observation, and returns a `DrillResult`.

Common shape: cut → send a marker mention while the agent is cut off (the human API
still answers) → hold the outage for its planned length (a deliberate duration, the
only sleep here) → restore → wait (deadline) until the platform lists the agent online
again (`reconnect_s`, from the restore) → wait for the ack of the marker sent during the
outage (`reply_s`, from the restore: nothing lost) → a fresh round trip (the label's
probe). Every wait polls a condition with a deadline.

- **network**: the platform holds every agent request and socket upgrade
  (`faults/pause`: connects hang, as on a black-holed network), then aborts every
  socket with no close frame (`faults/drop`); restored when the pause ends on the
  platform's own timer.
- **sleep**: SIGSTOP of every process of the box (the launcher/agent tree, found by its
  tag), held past the SDK's heartbeat watchdog; restored by SIGCONT.
- **daemon**: `Runtime.stop` (the box's processes end), then `Runtime.start` (the
  launcher starts the agent again). When the agent does not come back, the documented
  recovery: reap the dead agent and room, re-provision, probe the new agent.
- **platform**: the local platform is stopped (`service.down`: sockets closed,
  connections refused), then started again from its state file on the same port.

The sleep drill's default freeze is the SDK's own `dead_threshold_s` (read from
`band_sdk_core.SessionPolicy.default()`, 60 s) plus `FREEZE_MARGIN_S`, so the
watchdog's deadline has passed when the box thaws, as after a real host sleep.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from pathlib import Path

from bandkit.errors import BandkitError
from bandkit.kit import commands
from bandkit.runtimes import hostbox, processes
from bandkit.runtimes.base import Runtime, SandboxError, SandboxStatus
from smoke import probe as pr
from smoke import state as st
from smoke.context import Layout, Recorder, utc_now
from smoke.state import Label, ObservationKey
from smoke.target import Target, TargetError

RECONNECT_TIMEOUT_S = 60.0
RELAUNCH_TIMEOUT_S = 60.0
ONLINE_POLL_S = 0.05
ALIVE_CHECK_S = 1.0  # the box's liveness (a /proc scan) is checked less often than online
NETWORK_OUTAGE_S = 8.0
DAEMON_DOWN_S = 2.0
PLATFORM_DOWN_S = 3.0
FREEZE_MARGIN_S = 5.0
WATCHDOG_LOG = "No heartbeat ack within"  # the SDK's watchdog warning (band/client/streaming)


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


def default_freeze_s() -> float:
    return sdk_watchdog()[1] + FREEZE_MARGIN_S


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


@dataclass
class Box:
    """The run's sandbox as the drills handle it (local runtime: host processes)."""

    runtime: Runtime
    name: str

    def root(self) -> Path:
        run_dir = getattr(self.runtime, "run_dir", None)
        if run_dir is None:
            raise DrillError(f"the {self.runtime.name} runtime has no box processes to freeze")
        return Path(run_dir) / "boxes" / self.name

    def pids(self) -> list[int]:
        return processes.tagged_pids(hostbox.box_tag(self.root()))

    def status(self) -> SandboxStatus:
        return self.runtime.status(self.name)

    def signal(self, pids: list[int], sig: signal.Signals) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[list[int]]:
        """SIGSTOP the box's process tree; SIGCONT it on the way out, whatever happened."""
        pids = self.pids()
        if not pids:
            raise DrillError(f"sandbox {self.name} has no running processes to freeze")
        self.signal(pids, signal.SIGSTOP)
        try:
            yield pids
        finally:
            self.signal(pids, signal.SIGCONT)

    def log_tail(self, redact: list[str]) -> str:
        return commands.log_tail(self.runtime, self.name, redact)

    def log_count(self, text: str) -> int:
        """How many lines of the agent's startup log contain `text`."""
        try:
            return sum(text in line for line in self.runtime.logs(self.name).startup.splitlines())
        except SandboxError:
            return 0

    def log_problems(self, redact: list[str], count: int = 4) -> str:
        """The agent's last ERROR/WARNING lines (its startup log), secrets replaced."""
        try:
            text = self.runtime.logs(self.name).startup
        except SandboxError as exc:
            return f"(no logs: {exc})"
        lines = [ln.strip() for ln in text.splitlines() if " ERROR " in ln or " WARNING " in ln]
        out = " | ".join(lines[-count:]) or "(no warnings or errors logged)"
        for value in redact:
            if value:
                out = out.replace(value, "***")
        return out


@dataclass
class DrillContext:
    rec: Recorder
    layout: Layout
    target: Target
    box: Box
    runtime: str
    agent_env: dict[str, str] = field(default_factory=dict)
    reply_timeout_s: float = pr.REPLY_TIMEOUT_S
    reconnect_timeout_s: float = RECONNECT_TIMEOUT_S
    network_outage_s: float = NETWORK_OUTAGE_S
    freeze_s: float = field(default_factory=default_freeze_s)
    daemon_down_s: float = DAEMON_DOWN_S
    platform_down_s: float = PLATFORM_DOWN_S
    relaunch: bool = True  # False breaks the daemon drill's recovery on purpose (tests)
    log: Callable[[str], None] = print

    @property
    def room(self) -> str:
        return self.rec.state.room_id

    @property
    def agent_id(self) -> str:
        return self.rec.state.agent_id

    def is_online(self) -> bool:
        try:
            return pr.run_async(lambda: pr.online(self.target, self.room, self.agent_id))
        except Exception:
            return False  # the platform itself may be down (platform drill)

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
        token = pr.new_token()
        state = self.rec.state
        pr.run_async(
            lambda: pr.send_marker(self.target, self.room, self.agent_id, state.agent_name, token)
        )
        return token

    def box_alive(self) -> bool:
        return self.box.status() is SandboxStatus.RUNNING


def _hold_until(deadline: float, check: Callable[[], None] | None = None) -> None:
    """The deliberate outage: wait until `deadline`, calling `check` about twice a second."""
    while (left := deadline - time.monotonic()) > 0:
        if check is not None:
            check()
        time.sleep(min(0.5, left))


def _recover(ctx: DrillContext, drill: Drill, token: str, restored: float, t: Timings) -> bool:
    """After the restore: reconnect, the outage marker's ack, a fresh probe. Records the
    label's probe; True when all three happened."""
    label = LABELS[drill]
    restored_wall = utc_now() - timedelta(seconds=time.monotonic() - restored)
    since_restore = time.monotonic() - restored
    waited = ctx.wait_online(True, ctx.reconnect_timeout_s, alive=ctx.box_alive)
    t.reconnect_s = None if waited is None else since_restore + waited
    if t.reconnect_s is None:
        why = "the sandbox's processes are gone" if not ctx.box_alive() else "it stayed offline"
        problems = ctx.box.log_problems([ctx.target.user_key])
        pr.fail(
            ctx.rec,
            label,
            token,
            f"agent {ctx.agent_id} did not reconnect within {ctx.reconnect_timeout_s:.0f}s "
            f"after the restore ({why})",
        )
        _observe(ctx, drill, t, f"NOT RECOVERED: {why}. The agent last logged: {problems}")
        return False
    try:
        ack = pr.run_async(
            lambda: pr.await_ack(
                ctx.target,
                ctx.room,
                ctx.agent_id,
                token,
                since=restored,
                since_wall=restored_wall,
                timeout_s=ctx.reply_timeout_s,
            )
        )
        t.reply_s = ack.seconds
    except TimeoutError:
        pr.fail(
            ctx.rec,
            label,
            token,
            f"the message sent during the outage (marker {token}) was never answered",
        )
        _observe(ctx, drill, t, f"LOST MESSAGE: marker {token} sent during the outage")
        return False
    try:
        fresh = pr.run_async(
            lambda: pr.round_trip(
                ctx.target,
                ctx.room,
                ctx.agent_id,
                ctx.rec.state.agent_name,
                timeout_s=ctx.reply_timeout_s,
            )
        )
    except TimeoutError as exc:
        pr.fail(ctx.rec, label, "", f"the fresh probe after recovery failed: {exc}")
        _observe(ctx, drill, t, "the agent answered the outage message but not a fresh probe")
        return False
    t.probe_s = fresh.seconds
    pr.passed(
        ctx.rec,
        label,
        fresh.token,
        f"{ack.describe('outage marker answered')} (after restore); "
        f"{fresh.describe('fresh reply')}; reconnect {t.reconnect_s:.2f}s after restore",
    )
    return True


def _observe(ctx: DrillContext, drill: Drill, t: Timings, extra: str = "") -> None:
    text = t.describe() + (f". {extra}" if extra else "")
    ctx.rec.update(st.record_observation, OBSERVATIONS[drill], text)
    ctx.log(f"observation {OBSERVATIONS[drill]}: {text}")


# ---------------------------------------------------------------- the drills


def network_cut(ctx: DrillContext) -> DrillResult:
    t = Timings()
    notes: list[str] = []
    cut = time.monotonic()
    ctx.target.pause(ctx.network_outage_s)  # first: the reconnect attempts then hang
    restore_at = cut + ctx.network_outage_s
    dropped = ctx.target.drop_sockets()
    notes.append(f"{dropped} socket(s) dropped; agent traffic held {ctx.network_outage_s:g}s")
    t.offline_after_s = _offline_within(ctx, cut, restore_at)
    token = ctx.send_outage_marker()
    _hold_until(restore_at)
    ctx.target.wait_serving(10.0)
    restored = restore_at  # the platform's pause timer started after `cut`: a lower bound
    t.outage_s = restored - cut
    ok = _recover(ctx, Drill.NETWORK, token, restored, t)
    if ok:
        _observe(ctx, Drill.NETWORK, t, "; ".join(notes))
    return DrillResult(Drill.NETWORK, ok, t, notes)


def _offline_within(ctx: DrillContext, cut: float, until: float) -> float | None:
    """Seconds from `cut` until the platform listed the agent offline (None: not by `until`)."""
    waited = ctx.wait_online(False, max(0.0, until - time.monotonic()))
    return None if waited is None else time.monotonic() - cut


def sleep_wake(ctx: DrillContext) -> DrillResult:
    t = Timings()
    _, dead_threshold = sdk_watchdog()
    notes = [f"froze the box for {ctx.freeze_s:g}s (SDK heartbeat watchdog: {dead_threshold:g}s)"]
    fired_before = ctx.box.log_count(WATCHDOG_LOG)
    with ctx.box.frozen() as pids:
        cut = time.monotonic()
        notes.append(f"{len(pids)} process(es) stopped")
        token = ctx.send_outage_marker()
        thaw_at = cut + ctx.freeze_s
        t.offline_after_s = _offline_within(ctx, cut, thaw_at)
        _hold_until(thaw_at)
    restored = time.monotonic()
    t.outage_s = restored - cut
    if t.offline_after_s is None:
        notes.append("the platform kept the frozen agent's socket open")
    ok = _recover(ctx, Drill.SLEEP, token, restored, t)
    fired = ctx.box.log_count(WATCHDOG_LOG) - fired_before
    notes.append(
        f"the SDK's heartbeat watchdog fired {fired} time(s) after the thaw"
        if fired
        else "the agent saw its socket closed on thaw (the watchdog had nothing to force)"
    )
    if ok:
        _observe(ctx, Drill.SLEEP, t, "; ".join(notes))
    return DrillResult(Drill.SLEEP, ok, t, notes)


def daemon_restart(ctx: DrillContext) -> DrillResult:
    t = Timings()
    notes: list[str] = []
    cut = time.monotonic()
    try:
        ctx.box.runtime.stop(ctx.box.name)
    except SandboxError as exc:
        raise DrillError(f"could not stop sandbox {ctx.box.name}: {exc}") from None
    notes.append(f"sandbox stopped in {time.monotonic() - cut:.1f}s ({ctx.box.status()})")
    t.offline_after_s = _offline_within(ctx, cut, time.monotonic() + 10.0)
    token = ctx.send_outage_marker()
    _hold_until(time.monotonic() + ctx.daemon_down_s)
    if ctx.relaunch:
        try:
            ctx.box.runtime.start(ctx.box.name)
        except SandboxError as exc:
            notes.append(f"relaunch failed: {exc}")
    else:
        notes.append("not relaunched (recovery broken on purpose)")
    restored = time.monotonic()
    t.outage_s = restored - cut
    came_back = ctx.relaunch and (
        ctx.wait_online(True, RELAUNCH_TIMEOUT_S, alive=ctx.box_alive) is not None
    )
    if not came_back and ctx.relaunch:
        return _reprovision(ctx, t, notes, restored)
    ok = _recover(ctx, Drill.DAEMON, token, restored, t)
    if ok:
        _observe(ctx, Drill.DAEMON, t, "; ".join(notes))
    return DrillResult(Drill.DAEMON, ok, t, notes)


def _reprovision(ctx: DrillContext, t: Timings, notes: list[str], restored: float) -> DrillResult:
    """The documented recovery when the agent died with the daemon: reap, re-provision."""
    notes.append(
        "the agent did not come back after the relaunch: reaped its agent and room and "
        "re-provisioned (the message sent during the outage went to the reaped agent)"
    )
    ctx.log("daemon drill: the agent did not survive; reaping and re-provisioning")
    report = pr.cleanup_for_reprovision(ctx.rec, ctx.layout, ctx.target)
    if not report.clean:
        detail = "; ".join(report.problems)
        pr.fail(ctx.rec, Label.AFTER_DAEMON_RESTART, "", f"reaping the dead agent failed: {detail}")
        _observe(ctx, Drill.DAEMON, t, "; ".join(notes))
        return DrillResult(Drill.DAEMON, False, t, notes)
    try:
        pr.provision(ctx.rec, ctx.layout, ctx.target, runtime=ctx.runtime, agent_env=ctx.agent_env)
    except pr.ProbeFailed as exc:
        pr.fail(ctx.rec, Label.AFTER_DAEMON_RESTART, "", f"re-provisioning failed: {exc}")
        _observe(ctx, Drill.DAEMON, t, "; ".join(notes))
        return DrillResult(Drill.DAEMON, False, t, notes)
    t.reconnect_s = time.monotonic() - restored
    try:
        ack = pr.probe(ctx.rec, ctx.target, Label.AFTER_DAEMON_RESTART)
        t.probe_s = ack.seconds
        ok = True
    except pr.ProbeFailed:
        ok = False
    _observe(ctx, Drill.DAEMON, t, "; ".join(notes))
    return DrillResult(Drill.DAEMON, ok, t, notes)


def platform_restart(ctx: DrillContext) -> DrillResult:
    t = Timings()
    notes: list[str] = []
    cut = time.monotonic()
    try:
        ctx.target.stop_platform()
    except TargetError as exc:
        raise DrillError(str(exc)) from None
    notes.append(f"platform stopped in {time.monotonic() - cut:.1f}s")
    _hold_until(cut + ctx.platform_down_s)
    ctx.target.start_platform()
    restored = time.monotonic()
    t.outage_s = restored - cut
    token = ctx.send_outage_marker()  # the platform is back; the agent is not yet
    still_offline = not ctx.is_online()
    notes.append(
        "the outage message was sent right after the restart, "
        + ("while the agent was still offline" if still_offline else "the agent was already back")
    )
    ok = _recover(ctx, Drill.PLATFORM, token, restored, t)
    if ok:
        _observe(ctx, Drill.PLATFORM, t, "; ".join(notes))
    return DrillResult(Drill.PLATFORM, ok, t, notes)


RUNNERS: dict[Drill, Callable[[DrillContext], DrillResult]] = {
    Drill.NETWORK: network_cut,
    Drill.SLEEP: sleep_wake,
    Drill.DAEMON: daemon_restart,
    Drill.PLATFORM: platform_restart,
}


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
