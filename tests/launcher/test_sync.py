from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from launcher.errors import LauncherError
from launcher.handoff import ResolvedLaunch
from launcher.sync import (
    _redacted_tail,
    plan_sync,
    require_locked_project,
    resolve_uv,
    uv_environment,
)
from tests.launcher.fakes import resolved


def test_locked_project_is_required(tmp_path: Path) -> None:
    with pytest.raises(LauncherError, match=r"^\[sync\] pyproject.toml not found"):
        require_locked_project(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\n")
    with pytest.raises(LauncherError, match=r"run `uv lock` and commit uv.lock"):
        require_locked_project(tmp_path)
    (tmp_path / "uv.lock").write_text("")
    require_locked_project(tmp_path)


def test_uv_must_be_set_and_executable(tmp_path: Path) -> None:
    with pytest.raises(LauncherError, match="BAND_SDK_UV is not set"):
        resolve_uv("")
    script = tmp_path / "uv"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(LauncherError, match="not an executable file"):
        resolve_uv(str(script))
    script.chmod(0o755)
    assert resolve_uv(str(script)) == script


def test_uv_runs_pinned_and_offline_for_interpreters(tmp_path: Path) -> None:
    launch = resolved(tmp_path)
    env = uv_environment(launch)
    assert env["UV_PROJECT_ENVIRONMENT"] == str(launch.environment_path)
    assert env["UV_CACHE_DIR"] == str(launch.cache_path)
    assert env["UV_PYTHON"] == str(launch.interpreter)
    assert env["UV_PYTHON_DOWNLOADS"] == "never"
    assert env["HOME"] == "/home/agent"


def test_a_fresh_launch_needs_a_sync(tmp_path: Path) -> None:
    launch = resolved(tmp_path)
    (launch.project / "uv.lock").write_text("")
    plan = plan_sync(dataclasses.replace(launch, stamp={}))
    assert plan.needed
    assert plan.reason == "no record of a previous sync"


def test_uv_output_tail_is_short_and_redacted() -> None:
    text = "\n".join(f"line {i}" for i in range(40)) + "\nURL https://tok-123456@x"
    tail = _redacted_tail(text, {"GH_TOKEN": "tok-123456"})
    assert tail.count("\n") == 14
    assert "tok-123456" not in tail
    assert "***" in tail


def test_resolved_launch_never_shows_credentials(tmp_path: Path) -> None:
    launch: ResolvedLaunch = resolved(tmp_path)
    assert "sk-live" not in repr(launch)
