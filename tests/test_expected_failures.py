"""Failures a user can cause end as one clear error, never a traceback or a hang.

Each case found in review: a hung `docker info` (the daemon probe), a build whose output
stops (the build's deadline must hold while it streams), and a Dockerfile whose pins no
longer parse.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bandkit import dockercli
from bandkit.errors import BandkitError
from bandkit.image import build, facts


def _fake_docker(tmp_path: Path, script: str) -> None:
    binary = tmp_path / "docker"
    binary.write_text(f"#!/bin/sh\n{script}\n")
    binary.chmod(0o755)


@pytest.fixture
def fake_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def test_a_hung_daemon_probe_answers_false_within_its_timeout(fake_path: Path) -> None:
    _fake_docker(fake_path, "exec sleep 60")
    started = time.monotonic()
    assert dockercli.docker_answers(timeout_s=0.5) is False
    assert time.monotonic() - started < 10


def test_a_build_that_stops_printing_is_killed_at_its_deadline(fake_path: Path) -> None:
    _fake_docker(fake_path, 'echo "Step 1/9 : FROM base"; exec sleep 60')
    lines: list[str] = []
    started = time.monotonic()
    with pytest.raises(BandkitError, match=r"did not finish within 1s and was stopped"):
        build._run_streaming(["build", "."], lines.append, timeout_s=1)
    assert time.monotonic() - started < 15
    assert any("Step 1/9" in line for line in lines)


def test_an_unparseable_uv_pin_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(facts, "official_uv_image", lambda: "uv:latest")
    with pytest.raises(BandkitError, match=r"UV_IMAGE in .* is not pinned"):
        facts.uv_version()
