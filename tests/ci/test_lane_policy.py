"""The lane policy in tests/conftest.py, on the suite as collected: the fast lane's ceiling
is pyproject.toml's, and the docker lane starts with its one-demo-at-a-time chain."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import DAEMON_DEMO, FAST_TIMEOUT_S, critical_first

pytestmark = pytest.mark.timeout(20)

# Every test that runs the demo on the Docker daemon (its container names are fixed).
DAEMON_DEMOS = (
    "tests/bench/test_quick.py::test_each_docker_benchmark_runs_in_quick_mode[demo]",
    "tests/docker/test_demo_docker.py::",
    "tests/docker/test_demo_stub_docker.py::",
)


def test_the_fast_ceiling_is_pyprojects(repo_root: Path) -> None:
    config = tomllib.loads((repo_root / "pyproject.toml").read_text(encoding="utf-8"))
    assert float(config["tool"]["pytest"]["ini_options"]["timeout"]) == FAST_TIMEOUT_S


class _Item:
    def __init__(self, name: str, marked: bool) -> None:
        self.name, self.marked = name, marked

    def get_closest_marker(self, name: str) -> object | None:
        return object() if self.marked and name == DAEMON_DEMO else None


def test_the_chain_goes_first_and_each_part_keeps_its_order() -> None:
    items = [_Item("a", False), _Item("d1", True), _Item("b", False), _Item("d2", True)]
    ordered = critical_first(items)  # type: ignore[arg-type]
    assert [i.name for i in ordered] == ["d1", "d2", "a", "b"]


def test_the_docker_lane_collects_every_daemon_demo_first(repo_root: Path) -> None:
    """As the lane collects (its marks): the demo tests lead, and nothing else is marked."""
    lane = ["-m", "docker and not exclusive", "tests/bench/test_quick.py", "tests/docker"]
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *lane],
        cwd=repo_root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert listed.returncode == 0, listed.stdout[-2000:] + listed.stderr[-2000:]
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    demos = [i for i in ids if i.startswith(DAEMON_DEMOS)]
    assert len(demos) >= 6, ids  # the benchmark, two tiers and the kill, two stub runs
    assert ids[: len(demos)] == demos
