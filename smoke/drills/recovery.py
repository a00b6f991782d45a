"""The recovery check after an outage (`recover`: reconnect, the outage marker's ack, a
fresh probe; the label's probe recorded), the drill's observation (`observe`), and the
daemon drill's ending (`after_daemon`) with its documented recovery when the agent died
with the daemon (`reprovision`: reap the dead agent and room, provision anew).
"""

from __future__ import annotations

import time
from datetime import timedelta

from smoke import state as st
from smoke.cleanup import cleanup_for_reprovision
from smoke.context import utc_now
from smoke.drills.context import DrillContext
from smoke.drills.plan import LABELS, OBSERVATIONS, Drill, DrillResult, Timings
from smoke.outcome import ProbeFailed, fail, passed
from smoke.probe import probe
from smoke.provision import provision
from smoke.roundtrip import await_ack, round_trip, run_async
from smoke.state import Label

RELAUNCH_TIMEOUT_S = 60.0


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
        fail(
            ctx.rec,
            label,
            token,
            f"agent {ctx.agent_id} did not reconnect within {ctx.reconnect_timeout_s:.0f}s "
            f"after the restore ({why})",
        )
        observe(ctx, drill, t, f"NOT RECOVERED: {why}.{seen} The agent last logged: {problems}")
        return False
    try:
        ack = run_async(
            lambda: await_ack(
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
        fail(
            ctx.rec,
            label,
            token,
            f"the message sent during the outage (marker {token}) was never answered",
        )
        observe(ctx, drill, t, f"LOST MESSAGE: marker {token} sent during the outage.{seen}")
        return False
    try:
        fresh = run_async(
            lambda: round_trip(
                ctx.target,
                ctx.room,
                ctx.agent_id,
                ctx.rec.state.agent_name,
                timeout_s=ctx.reply_timeout_s,
            )
        )
    except TimeoutError as exc:
        fail(ctx.rec, label, "", f"the fresh probe after recovery failed: {exc}")
        observe(
            ctx, drill, t, f"the agent answered the outage message but not a fresh probe.{seen}"
        )
        return False
    t.probe_s = fresh.seconds
    passed(
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


def reprovision(ctx: DrillContext, t: Timings, notes: list[str], restored: float) -> DrillResult:
    """The documented recovery when the agent died with the daemon: reap, re-provision."""
    notes.append(
        "the agent did not come back after the relaunch: reaped its agent and room and "
        "re-provisioned (the message sent during the outage went to the reaped agent)"
    )
    ctx.log("daemon drill: the agent did not survive; reaping and re-provisioning")
    report = cleanup_for_reprovision(ctx.rec, ctx.layout, ctx.target)
    if not report.clean:
        detail = "; ".join(report.problems)
        fail(ctx.rec, Label.AFTER_DAEMON_RESTART, "", f"reaping the dead agent failed: {detail}")
        observe(ctx, Drill.DAEMON, t, "; ".join(notes))
        return DrillResult(Drill.DAEMON, False, t, notes)
    try:
        provision(
            ctx.rec,
            ctx.layout,
            ctx.target,
            runtime=ctx.runtime,
            agent_env=ctx.agent_env,
            image=ctx.image,
        )
    except ProbeFailed as exc:
        fail(ctx.rec, Label.AFTER_DAEMON_RESTART, "", f"re-provisioning failed: {exc}")
        observe(ctx, Drill.DAEMON, t, "; ".join(notes))
        return DrillResult(Drill.DAEMON, False, t, notes)
    t.reconnect_s = time.monotonic() - restored
    try:
        ack = probe(ctx.rec, ctx.target, Label.AFTER_DAEMON_RESTART)
        t.probe_s = ack.seconds
        ok = True
    except ProbeFailed:
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
