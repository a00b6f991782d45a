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


def _invoke_doctor(path: str, run_dir: Path) -> subprocess.CompletedProcess[str]:
    invoke = Path(sys.executable).parent / "invoke"
    env = {**os.environ, "PATH": path}
    return subprocess.run(
        [str(invoke), "doctor", "--run-dir", str(run_dir)],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        timeout=60,
        check=False,
    )


def test_invoke_doctor_exits_zero_with_required_tools(tmp_path: Path) -> None:
    # Only uv and git on PATH (and setpriv as root: the local runtime runs agents as
    # uid 1000 with it): optional tools absent must not fail the task.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("uv", "git", *(("setpriv",) if os.geteuid() == 0 else ())):
        real = subprocess.run(["which", tool], capture_output=True, text=True, check=True)
        (bindir / tool).symlink_to(real.stdout.strip())
    proc = _invoke_doctor(str(bindir), tmp_path / "run")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sbx" in proc.stdout
    assert "absent" in proc.stdout
    assert "runtime auto:  ok     local (no sbx, no Docker daemon)" in proc.stdout
    assert "doctor: ready" in proc.stdout


def test_invoke_doctor_as_root_without_setpriv_says_the_local_runtime_cannot_run(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("as another user the local runtime runs agents as that user")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("uv", "git"):
        real = subprocess.run(["which", tool], capture_output=True, text=True, check=True)
        (bindir / tool).symlink_to(real.stdout.strip())
    proc = _invoke_doctor(str(bindir), tmp_path / "run")
    assert proc.returncode == 1
    assert "would fail: runtime auto" in proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("runtime auto:"))
    assert "BLOCKS" in line
    assert "apt-get install util-linux" in line


def test_invoke_doctor_fails_without_git(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    real = subprocess.run(["which", "uv"], capture_output=True, text=True, check=True)
    (bindir / "uv").symlink_to(real.stdout.strip())
    proc = _invoke_doctor(str(bindir), tmp_path / "run")
    assert proc.returncode == 1
    assert "required tool(s) missing: git" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.e2e
def test_uv_run_invoke_doctor_on_this_machine(tmp_path: Path) -> None:
    """As a newcomer types it: every tool and every next step has its line; a line that is
    not ok names its fix; the exit code is 0 exactly when no line BLOCKS the default path."""
    from bandkit import doctor_next
    from tests import commands

    done = commands.run(
        ["uv", "run", "invoke", "doctor", "--run-dir", str(tmp_path / "run")], timeout=120
    )
    out = done.stdout.splitlines()
    for check in doctor.CHECKS:
        assert any(line.startswith(check.name) for line in out), check.name
    names = ["runtime auto", "kit image", "local bases", "iptables", "platform"]
    names += ["run directory", *(["checkout"] if os.geteuid() == 0 else [])]
    steps = [line for line in out if line.split(":", 1)[0] in names]
    assert [line.split(":", 1)[0] for line in steps] == names, done.stdout
    for line in steps:
        state = line.split(":", 1)[1].split()[0]
        assert state in (doctor_next.OK, doctor_next.TODO, doctor_next.NA, doctor_next.BLOCKS)
        if state in (doctor_next.TODO, doctor_next.BLOCKS):
            assert "; fix: " in line, line
    blocked = [line for line in steps if line.split(":", 1)[1].split()[0] == doctor_next.BLOCKS]
    assert done.returncode == (1 if blocked else 0), done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    print(done.stdout)
