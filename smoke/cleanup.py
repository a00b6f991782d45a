"""Reaping what a run made (probe label `cleanup`): the run's room, its sandbox
unprovisioned (sandbox, stored key, platform agent, manifest), ids carried over from
earlier runs and the workspace copy. A reap that fails keeps its id in the state for a
retry. `cleanup_for_reprovision` is the daemon drill's reap before it provisions anew.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

from bandkit.errors import BandkitError
from bandkit.kit import commands
from bandkit.kit.platform_api import delete_agent
from bandkit.kit.rooms import RoomError, delete_room, find_rooms_by_title
from smoke import state as st
from smoke.context import Layout, Recorder
from smoke.outcome import passed, reason, redact
from smoke.provision import room_title
from smoke.roundtrip import run_async
from smoke.state import Label, ReapKind
from smoke.target import Target


@dataclass
class CleanupReport:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems


def _reap_room(rec: Recorder, target: Target, room: str, report: CleanupReport) -> None:
    try:
        gone_now = delete_room(api_key=target.user_key, rest_url=target.rest_url, room_id=room)
    except RoomError as exc:
        report.problems.append(f"room {room}: {exc}")
        return
    rec.update(st.mark_reaped, ReapKind.ROOM, room)
    report.lines.append(f"room {room} {'deleted' if gone_now else 'already gone'}")


def _reap_agent(rec: Recorder, target: Target, agent_id: str, report: CleanupReport) -> None:
    try:
        run_async(
            lambda: delete_agent(
                api_key=target.user_key, rest_url=target.rest_url, agent_id=agent_id
            )
        )
    except Exception as exc:
        report.problems.append(f"agent {agent_id}: {reason(exc)}")
        return
    rec.update(st.mark_reaped, ReapKind.AGENT, agent_id)
    report.lines.append(f"agent {agent_id} deleted")


def unprovision_sandbox(
    layout: Layout, target: Target, sandbox: str, report: CleanupReport
) -> None:
    """Remove what the kit recorded for `sandbox` (sandbox, key, agent, manifest)."""
    if not layout.manifest(sandbox).exists():
        return
    try:
        removed = commands.unprovision(sandbox, run_dir=layout.kit_dir, api_key=target.user_key)
    except BandkitError as exc:
        report.problems.append(redact(f"sandbox {sandbox}: {exc}", target))
        return
    if removed.clean:
        report.lines.append(f"sandbox {sandbox} unprovisioned (sandbox, key, agent, manifest)")
    else:
        lines = "; ".join(removed.lines())
        report.problems.append(redact(f"sandbox {sandbox}: {lines}", target))


def cleanup_for_reprovision(rec: Recorder, layout: Layout, target: Target) -> CleanupReport:
    """Reap the run's current room, sandbox and agent (no probe recorded): the daemon
    drill's recovery when the agent did not survive, before it provisions anew."""
    report = CleanupReport()
    state = rec.state
    if state.room_id:
        _reap_room(rec, target, state.room_id, report)
    if state.sandbox_name:
        unprovision_sandbox(layout, target, state.sandbox_name, report)
    if state.agent_id:
        _reap_agent(rec, target, state.agent_id, report)
    return report


def cleanup(rec: Recorder, layout: Layout, target: Target) -> CleanupReport:
    """Reap the run's room and agent and anything carried over; record the cleanup probe."""
    report = CleanupReport()
    state = rec.state
    rooms = {state.room_id} | {u.id for u in state.unreaped if u.kind is ReapKind.ROOM}
    title = room_title(state.run_id)
    try:  # a room made by a run that stopped before it learned the id
        rooms |= set(
            run_async(
                lambda: find_rooms_by_title(
                    api_key=target.user_key, rest_url=target.rest_url, title=title
                )
            )
        )
    except Exception as exc:
        report.problems.append(f"listing rooms titled {title!r}: {reason(exc)}")
    for room in sorted(r for r in rooms if r):
        _reap_room(rec, target, room, report)
    sandboxes = sorted({state.sandbox_name, *_recorded_sandboxes(layout)} - {""})
    for sandbox in sandboxes:
        unprovision_sandbox(layout, target, sandbox, report)
    agents = {state.agent_id} | {u.id for u in rec.state.unreaped if u.kind is ReapKind.AGENT}
    for agent_id in sorted(a for a in agents if a):
        _reap_agent(rec, target, agent_id, report)  # already gone with the sandbox: a 404 is ok
    workspace = layout.workspace(state.run_id)
    if workspace.exists():
        shutil.rmtree(workspace, ignore_errors=True)
        report.lines.append("workspace copy removed")
    detail = "; ".join(report.lines + report.problems) or "nothing to reap"
    if report.clean:
        passed(rec, Label.CLEANUP, "", detail)
    else:
        rec.update(st.record_probe, Label.CLEANUP, "", False, detail)
        rec.log(f"probe cleanup: FAIL: {detail}")
    return report


def _recorded_sandboxes(layout: Layout) -> list[str]:
    """Smoke sandboxes with a provisioning manifest left (an earlier run that crashed)."""
    root = layout.kit_dir / "provision"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.name.startswith("smoke-"))
