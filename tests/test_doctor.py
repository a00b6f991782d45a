from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandkit import doctor


def _check(name: str, required: bool, ok: bool, detail: str = "d") -> doctor.Check:
    return doctor.Check(name, required, f"{name}-feature", lambda: (ok, detail))


def test_missing_required_lists_only_required_failures() -> None:
    results = doctor.probe_all(
        (_check("uv", True, False), _check("sbx", False, False), _check("git", True, True))
    )
    assert doctor.missing_required(results) == ["uv"]


def test_render_says_what_a_missing_tool_disables() -> None:
    table = doctor.render(
        doctor.probe_all((_check("sbx", False, False, "not on PATH"), _check("git", True, True)))
    )
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["tool", "status", "detail"]
    sbx_line = next(line for line in lines if line.startswith("sbx"))
    assert "absent" in sbx_line
    assert "disables sbx-feature" in sbx_line
    git_line = next(line for line in lines if line.startswith("git"))
    assert "disables" not in git_line


def test_render_marks_required_missing_loudly() -> None:
    table = doctor.render(doctor.probe_all((_check("uv", True, False),)))
    assert "MISSING" in table


def test_tool_probe_reports_absent_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    ok, detail = doctor._tool_version("uv", "--version")()
    assert not ok
    assert detail == "not on PATH"


def _invoke_doctor(path: str) -> subprocess.CompletedProcess[str]:
    invoke = Path(sys.executable).parent / "invoke"
    env = {**os.environ, "PATH": path}
    return subprocess.run(
        [str(invoke), "doctor"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        timeout=60,
        check=False,
    )


def test_invoke_doctor_exits_zero_with_required_tools(tmp_path: Path) -> None:
    # Only uv and git on PATH: optional tools absent must not fail the task.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("uv", "git"):
        real = subprocess.run(["which", tool], capture_output=True, text=True, check=True)
        (bindir / tool).symlink_to(real.stdout.strip())
    proc = _invoke_doctor(str(bindir))
    assert proc.returncode == 0, proc.stderr
    assert "sbx" in proc.stdout
    assert "absent" in proc.stdout


def test_invoke_doctor_fails_without_git(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    real = subprocess.run(["which", "uv"], capture_output=True, text=True, check=True)
    (bindir / "uv").symlink_to(real.stdout.strip())
    proc = _invoke_doctor(str(bindir))
    assert proc.returncode == 1
    assert "required tool(s) missing: git" in proc.stderr
    assert "Traceback" not in proc.stderr
