"""`release.refresh-locks`: every lock upgraded within the quarantine (`--exclude-newer` N
days back, then a plain `uv lock` so no cutoff stays recorded), then the gate; a uv run or
a gate that fails puts every lock back. With a recording runner, and with real uv offline
on small projects (no network: what resolves comes from nothing but the project itself)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bandkit.release import lock_refresh

NOW = datetime(2030, 6, 15, 12, 0, tzinfo=UTC)
ROOT_LOCK = """version = 1
revision = 3
requires-python = ">=3.11"

[[package]]
name = "{name}"
version = "0.1.0"
source = {{ virtual = "." }}
"""
SDIST = (
    '{{ url = "https://x.test/young-1.0.0.tar.gz", hash = "sha256:{h}", size = 1, '
    'upload-time = "2030-06-14T00:00:00Z" }}'
)
YOUNG_LOCK = f"""version = 1
revision = 3
requires-python = ">=3.11"

[[package]]
name = "young"
version = "1.0.0"
source = {{{{ registry = "https://pypi.org/simple" }}}}
sdist = {SDIST}
"""


def tree(tmp_path: Path, *projects: str) -> Path:
    for project in projects:
        (tmp_path / project).mkdir(parents=True, exist_ok=True)
        (tmp_path / project / "uv.lock").write_text(
            ROOT_LOCK.format(name=project.replace("/", "-").strip(".") or "root")
        )
    return tmp_path


class Recorder:
    """A stand-in runner: records argv, optionally fails one call or rewrites the lock."""

    def __init__(self, fail_at: int = -1, write: str = "") -> None:
        self.calls: list[list[str]] = []
        self.fail_at, self.write = fail_at, write

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if len(self.calls) - 1 == self.fail_at:
            Path(argv[-1], "uv.lock").write_text("half written")
            return subprocess.CompletedProcess(
                argv,
                2,
                "",
                "error: Failed to fetch: `https://pypi.org/simple/x/`\n  network unreachable",
            )
        if self.write:
            Path(argv[-1], "uv.lock").write_text(self.write)
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_the_cutoff_is_the_gate_age_back_in_utc() -> None:
    assert lock_refresh.cutoff(NOW, 7) == "2030-06-08T12:00:00Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        lock_refresh.cutoff(datetime(2030, 1, 1), 7)


def test_each_project_is_upgraded_within_the_quarantine_then_relocked_then_gated(
    tmp_path: Path,
) -> None:
    root = tree(tmp_path, ".", "smoke/agent")
    runner = Recorder()
    done = lock_refresh.refresh(
        (".", "smoke/agent"), days=7, now=NOW, root=root, uv="uv", runner=runner
    )
    assert done.exit_code == 0, done.render()
    assert runner.calls == [
        [
            "uv",
            "lock",
            "--upgrade",
            "--exclude-newer",
            "2030-06-08T12:00:00Z",
            "--directory",
            str(root / "."),
        ],
        ["uv", "lock", "--directory", str(root / ".")],
        [
            "uv",
            "lock",
            "--upgrade",
            "--exclude-newer",
            "2030-06-08T12:00:00Z",
            "--directory",
            str(root / "smoke/agent"),
        ],
        ["uv", "lock", "--directory", str(root / "smoke/agent")],
    ]
    assert [line.split(":", 1)[0] for line in done.lines[1:3]] == [".", "smoke/agent"]
    assert all("quarantine gate: pass" in line for line in done.lines[1:3])
    assert done.changed == []


def test_a_failed_uv_run_puts_every_lock_back_and_says_so(tmp_path: Path) -> None:
    root = tree(tmp_path, ".", "smoke/agent")
    before = {p: (root / p / "uv.lock").read_bytes() for p in (".", "smoke/agent")}
    runner = Recorder(fail_at=2, write=ROOT_LOCK.format(name="changed"))  # the 2nd project
    done = lock_refresh.refresh(
        (".", "smoke/agent"), days=7, now=NOW, root=root, uv="uv", runner=runner
    )
    assert done.exit_code == 1
    assert "failed in smoke/agent (exit 2)" in done.lines[-1]
    assert "network unreachable" in done.lines[-1]
    assert "every lock was put back, nothing changed" in done.lines[-1]
    assert {p: (root / p / "uv.lock").read_bytes() for p in before} == before


def test_a_lock_that_fails_the_gate_is_not_kept(tmp_path: Path) -> None:
    root = tree(tmp_path, ".")
    before = (root / "uv.lock").read_bytes()
    young = YOUNG_LOCK.format(h="a" * 64)  # uploaded a day before NOW
    done = lock_refresh.refresh(
        (".",), days=7, now=NOW, root=root, uv="uv", runner=Recorder(write=young)
    )
    assert done.exit_code == 1
    assert "young 1.0.0" in done.render()
    assert (root / "uv.lock").read_bytes() == before


def test_unknown_projects_and_missing_locks_are_refused(tmp_path: Path) -> None:
    unknown = lock_refresh.refresh(
        ("../elsewhere",), days=7, now=NOW, root=tmp_path, runner=Recorder()
    )
    assert (unknown.exit_code, "unknown project ../elsewhere" in unknown.lines[0]) == (1, True)
    missing = lock_refresh.refresh(
        ("smoke/agent",), days=7, now=NOW, root=tmp_path, runner=Recorder()
    )
    assert missing.exit_code == 2
    assert "no lock at smoke/agent/uv.lock" in missing.lines[0]


def test_the_projects_are_every_lock_git_tracks(repo_root: Path) -> None:
    tracked = subprocess.run(
        ["git", "ls-files", "--", "uv.lock", "**/uv.lock"], cwd=repo_root, capture_output=True,
        text=True, check=True, timeout=30,
    ).stdout.split()  # fmt: skip
    assert sorted(str(Path(p).parent) for p in tracked) == sorted(lock_refresh.UV_PROJECTS)


# Real uv, offline --------------------------------------------------------------------------


def project(tmp_path: Path, name: str, dependencies: str = "") -> Path:
    where = tmp_path / name
    where.mkdir(parents=True)
    (where / "pyproject.toml").write_text(
        f'[project]\nname = "{name.replace("/", "-")}"\nversion = "0.1.0"\n'
        f'requires-python = ">=3.11"\ndependencies = [{dependencies}]\n'
    )
    return where


def uv_offline(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UV_OFFLINE": "1", "UV_NO_CONFIG": "1"}
    return subprocess.run(
        ["uv", *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=120
    )


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("uv") is None:
        pytest.skip("uv is not on PATH")
    monkeypatch.setenv("UV_OFFLINE", "1")
    monkeypatch.setenv("UV_NO_CONFIG", "1")


def test_real_uv_leaves_no_cutoff_in_the_lock_so_lock_check_stays_clean(
    tmp_path: Path, offline: None
) -> None:
    where = project(tmp_path, "smoke/agent")
    assert uv_offline("lock", cwd=where).returncode == 0
    done = lock_refresh.refresh(("smoke/agent",), days=7, root=tmp_path)
    assert done.exit_code == 0, done.render()
    assert "exclude-newer" not in (where / "uv.lock").read_text()
    check = uv_offline("lock", "--check", cwd=where)
    assert check.returncode == 0, check.stderr


def test_real_uv_that_cannot_resolve_offline_changes_nothing(tmp_path: Path, offline: None) -> None:
    good = project(tmp_path, "smoke/agent")
    assert uv_offline("lock", cwd=good).returncode == 0
    bad = project(tmp_path, "examples/docker_demo/agents/pm")
    assert uv_offline("lock", cwd=bad).returncode == 0
    (bad / "pyproject.toml").write_text(
        (bad / "pyproject.toml")
        .read_text()
        .replace("dependencies = []", 'dependencies = ["no-such-package-xq7"]')
    )
    before = (good / "uv.lock").read_bytes(), (bad / "uv.lock").read_bytes()
    done = lock_refresh.refresh(
        ("smoke/agent", "examples/docker_demo/agents/pm"), days=7, root=tmp_path
    )
    assert done.exit_code == 1
    assert "failed in examples/docker_demo/agents/pm" in done.lines[-1]
    assert "nothing changed" in done.lines[-1]
    assert ((good / "uv.lock").read_bytes(), (bad / "uv.lock").read_bytes()) == before
