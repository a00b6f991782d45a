"""`main()`: usage, exit codes, errors as one clean `[phase]` line, --check output."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from launcher import identity
from launcher.run import main
from tests.launcher.fakes import CANARY, Box, base_env


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def as_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(identity, "current_uid", lambda: 1000)


def _env(monkeypatch: pytest.MonkeyPatch, box: Box, **extra: str) -> None:
    for key, value in base_env(box, **extra).items():
        monkeypatch.setenv(key, value)


def test_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "--check" in capsys.readouterr().out
    assert main(["--bogus"]) == 2
    assert "usage:" in capsys.readouterr().err


def test_check_prints_one_screen_and_writes_nothing(
    box: Box, as_agent: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (box.ws / "uv.lock").write_text("version = 1\n")
    box.write(box.config())
    from bandkit.runtimes.sdk_home import find_uv_binary

    _env(monkeypatch, box, OPENAI_API_KEY=CANARY, BAND_SDK_UV=str(find_uv_binary()))
    assert main(["--check"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("launcher check:")
    assert len(lines) <= 24
    assert any(line.split()[:1] == ["sync"] and "needed" in line for line in lines)
    assert CANARY not in out + err
    assert list(box.home.iterdir()) == []


@pytest.mark.parametrize(
    ("extra", "phase"),
    [
        ({}, "identity"),
        ({"WORKSPACE_DIR": "/nonexistent"}, "config"),
    ],
)
def test_failures_exit_1_with_the_phase_and_no_traceback(
    box: Box,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    extra: dict[str, str],
    phase: str,
) -> None:
    if phase != "identity":
        monkeypatch.setattr(identity, "current_uid", lambda: 1000)
    else:
        monkeypatch.setattr(identity, "current_uid", lambda: 4242)
    box.write(box.config())
    _env(monkeypatch, box, OPENAI_API_KEY=CANARY, **extra)
    assert main([]) == 1
    err = capsys.readouterr().err
    assert f"launch failed: [{phase}]" in err
    assert "Traceback" not in err
    assert CANARY not in err


def test_home_is_the_agent_home(
    box: Box, as_agent: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import os

    monkeypatch.setenv("HOME", "/root")
    _env(monkeypatch, box, WORKSPACE_DIR="/nonexistent")
    main([])
    assert os.environ["HOME"] == "/home/agent"
