"""What a newcomer runs first: which tools are here, and what each missing one disables.

`probe_all()` gathers facts (no judgement); `render()` turns them into a table;
`missing_required()` decides the exit code. Only uv and git are required: everything
else degrades a feature, and the table says which.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bandkit import tools
from bandkit.dockercli import server_version

MIN_PYTHON = (3, 11)
PROBE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Check:
    """One tool the kit may use, and what its absence costs."""

    name: str
    required: bool
    disables: str
    probe: Callable[[], tuple[bool, str]]


@dataclass(frozen=True)
class Result:
    name: str
    required: bool
    ok: bool
    detail: str
    disables: str


def _run(argv: Sequence[str]) -> tuple[int, str]:
    """Run a probe command; (returncode, first line of output). 127 when it cannot start."""
    try:
        proc = tools.run(argv, what=argv[0], timeout=PROBE_TIMEOUT_S, check=False)
    except tools.ToolError as exc:
        if exc.returncode == tools.TIMED_OUT:
            return exc.returncode, f"timed out after {PROBE_TIMEOUT_S:.0f}s"
        return exc.returncode, "not found"
    out = (proc.stdout or proc.stderr).strip().splitlines()
    return proc.returncode, out[0].strip() if out else ""


def _tool_version(tool: str, *args: str) -> Callable[[], tuple[bool, str]]:
    def probe() -> tuple[bool, str]:
        path = shutil.which(tool)
        if path is None:
            return False, "not on PATH"
        code, line = _run([path, *args])
        return code == 0, line if code == 0 else f"{path}: exit {code}: {line}"

    return probe


def _python() -> tuple[bool, str]:
    version = ".".join(str(p) for p in sys.version_info[:3])
    ok = sys.version_info[:2] >= MIN_PYTHON
    want = ".".join(str(p) for p in MIN_PYTHON)
    return ok, version if ok else f"{version} (need >= {want})"


def _docker_daemon() -> tuple[bool, str]:
    if shutil.which("docker") is None:
        return False, "no docker client"
    version = server_version()
    if version:
        return True, f"server {version}"
    return False, "daemon not answering (start dockerd, or `sudo systemctl start docker`)"


def _sbx() -> tuple[bool, str]:
    path = shutil.which("sbx")
    if path is None:
        return False, "not on PATH"
    code, line = _run([path, "version"])
    return code == 0, line if code == 0 else f"exit {code}: {line}"


CHECKS: tuple[Check, ...] = (
    Check("python", True, "everything (the kit needs Python >= 3.11)", _python),
    Check("uv", True, "everything (sync, locks, nox sessions)", _tool_version("uv", "--version")),
    Check(
        "git", True, "repo bootstrap and credential-file guards", _tool_version("git", "--version")
    ),
    Check(
        "docker client",
        False,
        "image build and the docker runtime",
        _tool_version("docker", "--version"),
    ),
    Check("docker daemon", False, "image build, docker runtime and docker tests", _docker_daemon),
    Check("sbx", False, "the sbx runtime (real Docker Sandboxes); docker or local is used", _sbx),
)


def probe_all(checks: Sequence[Check] = CHECKS) -> list[Result]:
    results = []
    for check in checks:
        ok, detail = check.probe()
        results.append(Result(check.name, check.required, ok, detail, check.disables))
    return results


def missing_required(results: Sequence[Result]) -> list[str]:
    return [r.name for r in results if r.required and not r.ok]


def render(results: Sequence[Result]) -> str:
    rows = [("tool", "status", "detail", "if missing")]
    for r in results:
        status = "ok" if r.ok else ("MISSING" if r.required else "absent")
        rows.append((r.name, status, r.detail, "" if r.ok else f"disables {r.disables}"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])).rstrip()
        + (f"  {row[3]}" if row[3] else "")
        for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
