"""Restarting the Docker daemon: which daemons `find` refuses (no daemon needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandkit.ci import dockerd


def test_dockerd_find_refuses_another_daemon_and_a_missing_pidfile(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.5:2376")
    with pytest.raises(dockerd.DockerdError, match="another daemon"):
        dockerd.find(tmp_path / "docker.pid")
    monkeypatch.delenv("DOCKER_HOST")
    monkeypatch.setattr(dockerd, "as_root", lambda argv: list(argv))
    with pytest.raises(dockerd.DockerdError, match="no readable dockerd pidfile"):
        dockerd.find(tmp_path / "docker.pid")
    (tmp_path / "docker.pid").write_text("1\n")  # pid 1 here is not a dockerd
    with pytest.raises(dockerd.DockerdError, match="is not a running dockerd"):
        dockerd.find(tmp_path / "docker.pid")
