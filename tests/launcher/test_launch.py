"""The resolved launch record, the child environment and the exec hand-off."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from launcher import launch as launch_module
from launcher.errors import LauncherError
from launcher.launch import build_child_environment, execute
from tests.launcher.fakes import resolved


def test_child_environment_is_exact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEEP_ME", "1")
    monkeypatch.setenv("band_api_key", "lowercase-spelling")
    monkeypatch.setenv("HOME", "/root")
    child = build_child_environment(resolved(tmp_path))
    assert child["KEEP_ME"] == "1"
    assert child["BAND_API_KEY"] == "sk-live-000"
    assert child["GH_TOKEN"] == "gh"
    assert child["BAND_AGENT_ID"] == "agent-1"
    assert child["BAND_REST_URL"] == "https://r.example"
    assert child["BAND_WS_URL"] == "wss://w.example/s"
    assert child["HOME"] == "/home/agent"


def test_execute_syncs_then_execs_the_venv_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launch = resolved(tmp_path)
    python = launch.environment_path / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    calls: list[object] = []
    monkeypatch.setattr("launcher.sync.synchronize", lambda launch: calls.append("sync"))

    def fake_execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append((path, argv, os.getcwd(), env["BAND_AGENT_ID"]))
        raise SystemExit(0)  # a real execve never returns

    monkeypatch.setattr(launch_module.os, "execve", fake_execve)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        execute(launch)
    assert calls == [
        "sync",
        (str(python), [str(python), str(launch.entrypoint)], str(launch.project), "agent-1"),
    ]


def test_execute_waits_for_the_endpoints_after_the_sync_and_before_the_exec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    launch = replace(resolved(tmp_path), endpoint_wait_s=45.0)
    python = launch.environment_path / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    calls: list[object] = []
    monkeypatch.setattr("launcher.sync.synchronize", lambda launch: calls.append("sync"))

    def fake_wait(urls: tuple[str, ...], wait_s: float) -> bool:
        calls.append(("reach", urls, wait_s))
        return True

    def fake_execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        calls.append("exec")
        raise SystemExit(0)

    monkeypatch.setattr(launch_module, "wait_for_endpoints", fake_wait)
    monkeypatch.setattr(launch_module.os, "execve", fake_execve)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        execute(launch)
    assert calls == ["sync", ("reach", ("https://r.example", "wss://w.example/s"), 45.0), "exec"]


def test_missing_interpreter_after_sync_fails_in_exec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("launcher.sync.synchronize", lambda launch: None)
    with pytest.raises(LauncherError, match=r"^\[exec\] the venv has no interpreter"):
        execute(resolved(tmp_path))


def test_exec_failure_is_an_exec_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    launch = resolved(tmp_path)
    python = launch.environment_path / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("not a program")
    monkeypatch.setattr("launcher.sync.synchronize", lambda launch: None)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(LauncherError, match=r"^\[exec\] cannot execute"):
        execute(launch)
