"""`demo.status` and `demo.logs`: read a run's record and its sandboxes, change nothing.

`status` reads the manifest without taking its lock (a running `demo.up` holds it), so it
answers while a meeting is on: what is recorded, whether each demo sandbox runs, the room
page. `role_logs` prints the end of one role's (or each role's) startup log (the agent's
stdout and stderr) and of its launcher log, from the runtime the run used, control
characters escaped; `follow` (`demo.logs --follow`) streams them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from pydantic import ValidationError

from bandkit.demo import DemoError
from bandkit.demo.layout import DemoLayout, RunInfo
from bandkit.manifest import ManifestFile
from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.select import get_runtime
from bandkit.terminal import printable
from examples.docker_demo.cast import CAST, Member, member

DEFAULT_LINES: Final = 60


def _layout(run_dir: Path) -> tuple[DemoLayout, RunInfo | None]:
    layout = DemoLayout.for_run_dir(run_dir)
    info = layout.read_info()
    if info is not None:
        layout = DemoLayout(layout.run_dir, Path(info.box_root))
    return layout, info


def status_lines(run_dir: Path) -> list[str]:
    layout, info = _layout(run_dir)
    if not layout.manifest.exists():
        lines = ["demo: nothing recorded (no run in progress, nothing left behind)"]
        if layout.transcript.exists():
            lines.append(f"last transcript: {layout.transcript}")
        return lines
    try:
        recorded = ManifestFile.model_validate_json(layout.manifest.read_text(encoding="utf-8"))
    except (OSError, ValidationError, ValueError):
        return [f"demo: the manifest {layout.manifest} is unreadable; inspect it by hand"]
    lines = [f"demo: a run is recorded in {layout.manifest} ({len(recorded.resources)} entries)"]
    if info is not None:
        lines += [
            f"scenario: {info.scenario}; {info.runtime} runtime; {info.platform} platform "
            f"{info.rest_url}",
            f"room page: {info.room_url or '(no room yet)'}",
        ]
        try:
            runtime = get_runtime(info.runtime, run_dir=layout.runtimes)
            lines += [
                f"sandbox {m.sandbox} ({m.name}): {runtime.status(m.sandbox).value}"
                for m in CAST.values()
            ]
        except SandboxError as exc:
            lines.append(f"sandboxes: cannot ask the {info.runtime} runtime: {exc}")
    lines += [f"  {r.ref}" for r in recorded.resources]
    lines.append("`uv run invoke demo.down` removes all of it")
    return lines


def roles_for(role: str) -> list[Member]:
    """The member `role` names, or all three for ""."""
    if not role:
        return list(CAST.values())
    try:
        return [member(role)]
    except ValueError as exc:
        raise DemoError(f"--role: {exc}") from None


def role_logs(run_dir: Path, role: str = "", *, lines: int = DEFAULT_LINES) -> str:
    """The end of the startup and launcher logs of `role` (all three for "")."""
    who = roles_for(role)
    layout, info = _layout(run_dir)
    if info is None:
        raise DemoError(
            f"no demo run recorded in {layout.home}; start one with `uv run invoke demo.up --keep`"
        )
    try:
        runtime = get_runtime(info.runtime, run_dir=layout.runtimes)
        found = {m.role: runtime.logs(m.sandbox) for m in who}
    except SandboxError as exc:
        raise DemoError(str(exc)) from None
    parts = []
    for m in who:
        startup = _tail(found[m.role].startup, lines)
        launcher = _tail(found[m.role].launcher, lines)
        parts.append(
            f"== {m.name}: startup log ({m.sandbox}) ==\n{startup}\n"
            f"== {m.name}: launcher log ==\n{launcher}"
        )
    return "\n".join(parts)


def _tail(text: str, lines: int) -> str:
    """The last `lines` lines, control characters escaped (a sandbox wrote them)."""
    return "\n".join(printable(line) for line in text.splitlines()[-lines:]) or "(empty)"
