from __future__ import annotations

import pytest

from bandkit.ci import prepare as ciprep
from bandkit.ci.lanes import Lane


def test_packages_for_dedups_and_adds_docker_for_docker_lanes() -> None:
    chosen = [Lane("a", "a", apt=("shellcheck",)), Lane("b", "b", docker=True, apt=("shellcheck",))]
    assert ciprep.packages_for(chosen) == ["shellcheck", *ciprep.DOCKER_PACKAGES]


def test_a_running_docker_is_kept_rather_than_installing_debians_beside_it() -> None:
    chosen = [Lane("b", "b", docker=True, apt=("debootstrap",))]
    assert ciprep.packages_for(chosen, have_docker=True) == ["debootstrap"]


def test_prepare_installs_docker_only_when_no_daemon_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[list[str]] = []
    monkeypatch.setattr(ciprep, "install_packages", lambda p: asked.append(list(p)) or [])
    monkeypatch.setattr(ciprep, "ensure_dockerd", lambda: False)
    monkeypatch.setattr(ciprep, "docker_answers", lambda: True)
    ciprep.prepare(["docker_tests"])
    monkeypatch.setattr(ciprep, "docker_answers", lambda: False)
    ciprep.prepare(["docker_tests"])
    assert [p for p in asked[0] if p in ciprep.DOCKER_PACKAGES] == []
    assert set(ciprep.DOCKER_PACKAGES) <= set(asked[1])


def test_prepare_rejects_unknown_lane() -> None:
    with pytest.raises(ciprep.PrepareError, match="unknown lane 'nope'"):
        ciprep.prepare(["nope"])
