from __future__ import annotations

import pytest

from bandkit import ciprep
from bandkit.lanes import Lane


def test_packages_for_dedups_and_adds_docker_for_docker_lanes() -> None:
    chosen = [Lane("a", "a", apt=("shellcheck",)), Lane("b", "b", docker=True, apt=("shellcheck",))]
    assert ciprep.packages_for(chosen) == ["shellcheck", *ciprep.DOCKER_PACKAGES]


def test_prepare_rejects_unknown_lane() -> None:
    with pytest.raises(ciprep.PrepareError, match="unknown lane 'nope'"):
        ciprep.prepare(["nope"])
