"""`release.refresh-locks`: every uv lock upgraded within the quarantine, then the gate.

For each uv project (`UV_PROJECTS`: the root and every project with its own lock, the
directories `.github/dependabot.yml` watches), two `uv lock` runs:

1. `uv lock --upgrade --exclude-newer <now - N days> --directory DIR`: the newest
   versions already N days on the index (N: `release.max_age_days`, the gate's 7);
2. `uv lock --directory DIR`: the same pins, without the cutoff recorded in the lock
   (uv writes `exclude-newer` into it, and `uv lock --check` without the option, as the
   lint session runs it, would then call the lock stale).

Then the quarantine gate (`lock_gate`) on every lock. Fail closed and offline-safe: when
a uv run fails (no network and nothing cached, say) or a lock fails the gate, every lock is
put back byte for byte and the result says which project and why; nothing changes.
Exit: 0 every lock refreshed and passing; 1 a uv run failed or the gate found violations
(nothing changed); 2 a lock could not be read.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bandkit.fsio import write_atomic
from bandkit.image.facts import REPO_ROOT
from bandkit.release import lock_gate

# The root project and every project with its own lock (noxfile's LOCKED_PROJECTS, and
# the uv directories of .github/dependabot.yml; tests/ci/test_dependabot.py keeps them in
# step with the locks git tracks).
UV_PROJECTS = (
    ".",
    "docker/band_python_kit/echo-agent",
    "docker/band_python_kit/sdk",
    "examples/docker_demo/agents/architect",
    "examples/docker_demo/agents/dev",
    "examples/docker_demo/agents/pm",
    "smoke/agent",
)
UV_TIMEOUT_S = 600.0
Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


def cutoff(now: datetime, days: float) -> str:
    """The `--exclude-newer` timestamp: `days` before `now`, RFC 3339 in UTC."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    return (now - timedelta(days=days)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_uv(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, check=False, timeout=UV_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(
            list(argv), 124, "", f"timed out after {UV_TIMEOUT_S:g}s"
        )
    except OSError as exc:
        return subprocess.CompletedProcess(list(argv), 127, "", f"cannot run {argv[0]}: {exc}")


@dataclass
class Refresh:
    """What a refresh did: the lines to print, the locks it changed, and its exit code."""

    lines: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    exit_code: int = 0

    def render(self) -> str:
        return "\n".join(self.lines)


def refresh(
    projects: Sequence[str] = UV_PROJECTS,
    *,
    days: float,
    now: datetime | None = None,
    root: Path = REPO_ROOT,
    uv: str = "",
    runner: Runner = run_uv,
) -> Refresh:
    """Refresh the locks of `projects` (directories under `root`); see the module docstring."""
    result = Refresh()
    unknown = [p for p in projects if p not in UV_PROJECTS]
    if unknown or not projects:
        result.lines.append(
            f"refresh-locks: unknown project {', '.join(unknown) or '(none given)'}; choose "
            f"from {', '.join(UV_PROJECTS)}"
        )
        result.exit_code = 1
        return result
    when = now or datetime.now(UTC)
    stamp = cutoff(when, days)
    binary = uv or shutil.which("uv") or "uv"
    locks = [root / project / "uv.lock" for project in projects]
    missing = [str(lock.relative_to(root)) for lock in locks if not lock.is_file()]
    if missing:
        result.lines.append(f"refresh-locks: no lock at {', '.join(missing)}; nothing changed")
        result.exit_code = 2
        return result
    before = {lock: (lock.read_bytes(), lock.stat().st_mode & 0o777) for lock in locks}
    result.lines.append(
        f"refresh-locks: {len(locks)} lock(s), newest versions uploaded before {stamp} "
        f"({days:g} days ago)"
    )
    for project, lock in zip(projects, locks, strict=True):
        directory = str(root / project)
        for argv in (
            [binary, "lock", "--upgrade", "--exclude-newer", stamp, "--directory", directory],
            [binary, "lock", "--directory", directory],  # the same pins, no cutoff recorded
        ):
            done = runner(argv)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                _restore(before)
                result.lines.append(
                    f"refresh-locks: `uv {' '.join(argv[1:3])}` failed in {project} (exit "
                    f"{done.returncode}): {' | '.join(tail)}; offline? every lock was put "
                    "back, nothing changed"
                )
                result.exit_code = 1
                return result
        if lock.read_bytes() != before[lock][0]:
            result.changed.append(project)
    worst = 0
    for project, lock in zip(projects, locks, strict=True):
        gate = lock_gate.run(lock, days, now=when)
        result.lines.append(f"{project}: {gate.render()}")
        worst = max(worst, gate.exit_code)
    if worst:
        _restore(before)
        result.changed = []
        result.lines.append(
            "refresh-locks: the quarantine gate failed (above); every lock was put back, "
            "nothing changed"
        )
        result.exit_code = worst
        return result
    changed = ", ".join(result.changed) or "none (already the newest within the quarantine)"
    result.lines.append(f"refresh-locks: changed {changed}; every lock passes the gate")
    return result


def _restore(before: dict[Path, tuple[bytes, int]]) -> None:
    for lock, (data, mode) in before.items():
        try:
            same = lock.read_bytes() == data
        except OSError:
            same = False
        if not same:
            write_atomic(lock, data, mode=mode)
