"""The interruptions, drilled automatically: network cut, sleep/wake, daemon restart,
platform restart. Each measures its timings, proves nothing was lost, records one probe
and one observation, and returns a `DrillResult`.

Common shape: cut → send a marker mention while the agent is cut off (the human API
still answers) → hold the outage for its planned length (a deliberate duration, the
only sleep here) → restore → wait (deadline) until the platform lists the agent online
again (`reconnect_s`, from the restore) → wait for the ack of the marker sent during the
outage (`reply_s`, from the restore: nothing lost) → a fresh round trip (the label's
probe). Every wait polls a condition with a deadline.

This module holds what every runtime shares: the sandbox handle (`Box`, whose
`frozen()` each runtime implements), the context, the recovery check (`recover`), the
daemon drill's documented recovery (`reprovision`: reap the dead agent and room,
provision anew), and the two drills that do not depend on the runtime:

- **sleep**: the box frozen (`Box.frozen`: SIGSTOP of the box's process tree on local,
  `docker pause` on docker) past the SDK's heartbeat watchdog, then thawed;
- **platform**: the local platform is stopped (`service.down`: sockets closed,
  connections refused), then started again from its state file on the same port.

The network cut and the daemon restart are the runtime's own: `smoke.local_drills`
(the platform's socket drop, the box killed and relaunched) and `smoke.docker_drills`
(`docker network disconnect`/`connect`, a restart of the Docker daemon itself).

The sleep drill's default freeze is the SDK's own `dead_threshold_s` (read from
`band_sdk_core.SessionPolicy.default()`, 60 s) plus `FREEZE_MARGIN_S`, so the
watchdog's deadline has passed when the box thaws, as after a real host sleep.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum

from bandkit.errors import BandkitError
from bandkit.kit import commands
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
BACKOFF_RE = re.compile(r"SDK reconnect delay ([0-9.]+)s \(attempt (\d+)\)")  # smoke agent


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
    backoff_s: list[float] = field(default_factory=list)  # the SDK's reconnect waits seen


@dataclass
class Box:
    """The run's sandbox as the drills handle it; each runtime's drills module subclasses
    it with the way to freeze it (`frozen`) and whatever its own drills need."""

    runtime: Runtime
    name: str

    def status(self) -> SandboxStatus:
        return self.runtime.status(self.name)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[str]:
        """Freeze the sandbox for the body, thaw it on the way out whatever happened;
        yields a note (what was frozen)."""
        raise DrillError(f"the {self.runtime.name} runtime has no way to freeze a sandbox")
        yield ""  # pragma: no cover

    def log_tail(self, redact: list[str]) -> str:
        return commands.log_tail(self.runtime, self.name, redact)

    def log_lines(self) -> list[str]:
        """The agent's startup log (its stdout/stderr), [] when unreadable."""
        try:
            return self.runtime.logs(self.name).startup.splitlines()
        except SandboxError:
            return []

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


def hold_until(deadline: float, check: Callable[[], None] | None = None) -> None:
    """The deliberate outage: wait until `deadline`, calling `check` about twice a second."""
    while (left := deadline - time.monotonic()) > 0:
        if check is not None:
            check()
        time.sleep(min(0.5, left))


def recover(
    ctx: DrillContext,
    drill: Drill,
    token: str,
    restored: float,
    t: Timings,
    notes: list[str] | None = None,
) -> bool:
    """After the restore: reconnect, the outage marker's ack, a fresh probe. Records the
    label's probe, and on failure the observation (with the drill's `notes`); True when
    all three happened."""
    label = LABELS[drill]
    seen = "; ".join(notes or [])
    seen = f" What the drill saw: {seen}." if seen else ""
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
        observe(ctx, drill, t, f"NOT RECOVERED: {why}.{seen} The agent last logged: {problems}")
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
        observe(ctx, drill, t, f"LOST MESSAGE: marker {token} sent during the outage.{seen}")
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
        observe(
            ctx, drill, t, f"the agent answered the outage message but not a fresh probe.{seen}"
        )
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


def observe(ctx: DrillContext, drill: Drill, t: Timings, extra: str = "") -> None:
    text = t.describe() + (f". {extra}" if extra else "")
    ctx.rec.update(st.record_observation, OBSERVATIONS[drill], text)
    ctx.log(f"observation {OBSERVATIONS[drill]}: {text}")


# ---------------------------------------------------------------- the drills


def offline_within(ctx: DrillContext, cut: float, until: float) -> float | None:
    """Seconds from `cut` until the platform listed the agent offline (None: not by `until`)."""
    waited = ctx.wait_online(False, max(0.0, until - time.monotonic()))
    return None if waited is None else time.monotonic() - cut


@dataclass
class AgentLog:
    """What the agent logged during a drill: its watchdog firing, its reconnect delays."""

    watchdog_fired: int
    backoff_s: list[float]

    @classmethod
    def since(cls, box: Box, mark: int) -> AgentLog:
        lines = box.log_lines()[mark:]
        delays = [float(m.group(1)) for ln in lines if (m := BACKOFF_RE.search(ln))]
        return cls(sum(WATCHDOG_LOG in ln for ln in lines), delays)

    def notes(self) -> list[str]:
        fired = (
            f"the SDK's heartbeat watchdog fired {self.watchdog_fired} time(s)"
            if self.watchdog_fired
            else "the SDK's heartbeat watchdog did not fire (the agent saw its socket fail first)"
        )
        if not self.backoff_s:
            return [fired, "no SDK reconnect delay logged"]
        waits = ", ".join(f"{d:.1f}" for d in self.backoff_s)
        return [fired, f"SDK reconnect backoff: {len(self.backoff_s)} wait(s) of {waits}s"]


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


def reprovision(ctx: DrillContext, t: Timings, notes: list[str], restored: float) -> DrillResult:
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
        observe(ctx, Drill.DAEMON, t, "; ".join(notes))
        return DrillResult(Drill.DAEMON, False, t, notes)
    try:
        pr.provision(
            ctx.rec,
            ctx.layout,
            ctx.target,
            runtime=ctx.runtime,
            agent_env=ctx.agent_env,
            image=ctx.image,
        )
    except pr.ProbeFailed as exc:
        pr.fail(ctx.rec, Label.AFTER_DAEMON_RESTART, "", f"re-provisioning failed: {exc}")
        observe(ctx, Drill.DAEMON, t, "; ".join(notes))
        return DrillResult(Drill.DAEMON, False, t, notes)
    t.reconnect_s = time.monotonic() - restored
    try:
        ack = pr.probe(ctx.rec, ctx.target, Label.AFTER_DAEMON_RESTART)
        t.probe_s = ack.seconds
        ok = True
    except pr.ProbeFailed:
        ok = False
    observe(ctx, Drill.DAEMON, t, "; ".join(notes))
    return DrillResult(Drill.DAEMON, ok, t, notes)


def after_daemon(
    ctx: DrillContext, token: str, restored: float, t: Timings, notes: list[str], *, back: bool
) -> DrillResult:
    """The end of every daemon drill: wait for the agent when it should be `back` (it
    survived or was relaunched), else re-provision when relaunching is on; then the probe."""
    came_back = back and ctx.wait_online(True, RELAUNCH_TIMEOUT_S, alive=ctx.box_alive) is not None
    if not came_back and ctx.relaunch:
        return reprovision(ctx, t, notes, restored)
    ok = recover(ctx, Drill.DAEMON, token, restored, t, notes)
    if ok:
        observe(ctx, Drill.DAEMON, t, "; ".join(notes))
    return DrillResult(Drill.DAEMON, ok, t, notes)


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
