"""Shared fixtures and the lane policy. Markers are registered in pyproject.toml.

Lanes (noxfile.py): `tests` runs everything that is neither `e2e` nor `docker` (nor
`live`), and every test in it must finish in `FAST_TIMEOUT_S` (pytest-timeout, set in
pyproject.toml: setup and teardown count). A test marked `e2e` or `docker` gets
`SLOW_TIMEOUT_S` unless it names its own timeout; a fast-lane test that names a longer
one fails at collection, so a slow test cannot creep into the everyday loop unmarked.

A test marked `daemon_demo` runs the demo on the Docker daemon, whose container names are
fixed: it holds the run's one-demo lock (`one_demo_on_the_daemon`), so those tests run one
after another whichever worker has them. That chain is the docker lane's longest, so they
are sorted first (`critical_first`) and start as the lane starts; the other workers fill
in around it and steal from the back of the first worker's queue, never the chain's head.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock

from tests.runtimes.helpers import agent_sdk_env, scratch_dir
from tests.support import images
from tests.support.readme import clean_env

REPO_ROOT = Path(__file__).resolve().parent.parent
FAST_TIMEOUT_S = 20.0  # pyproject.toml's `timeout` (tests/ci/test_lane_policy.py: the same)
SLOW_TIMEOUT_S = 900.0
SLOW_LANES = ("e2e", "docker", "cluster")
DAEMON_DEMO = "daemon_demo"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        named = item.get_closest_marker("timeout")
        if any(item.get_closest_marker(lane) for lane in SLOW_LANES):
            if named is None:
                item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
        elif named is not None and _seconds(named) > FAST_TIMEOUT_S:
            raise pytest.UsageError(
                f"{item.nodeid} asks for a {_seconds(named):g} s timeout, but the fast lane "
                f"allows {FAST_TIMEOUT_S:g} s: mark it e2e (or docker), or make it faster"
            )
    items[:] = critical_first(items)


def critical_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """`items` with the `daemon_demo` chain first, each part in its collected order."""
    return sorted(items, key=lambda item: item.get_closest_marker(DAEMON_DEMO) is None)


def _seconds(marker: pytest.Mark) -> float:
    value = marker.args[0] if marker.args else marker.kwargs.get("timeout", 0)
    return float(value or 0)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def agent_sdk() -> Iterator[None]:
    """As root, one image-like SDK home for every box this worker starts (the agent uid
    cannot run root's python), in `BANDKIT_AGENT_SDK` until the session ends."""
    with agent_sdk_env():
        yield


@pytest.fixture(scope="session")
def run_shared(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """One directory for this whole pytest run, the same for every xdist worker: where
    work done once per run (an image build, say) keeps its lock and its result."""
    base = tmp_path_factory.getbasetemp()
    shared = base if worker_id == "master" else base.parent
    return shared


@pytest.fixture(autouse=True)
def one_demo_on_the_daemon(request: pytest.FixtureRequest) -> Iterator[None]:
    """The demo's containers have fixed names (band-demo-pm, ...): a `daemon_demo` test
    holds the run's demo lock while it runs, so one demo is on the Docker daemon at a time
    whichever xdist worker runs it (its module-scoped fixtures, a build say, come first
    and do not hold it). Other tests pass straight through."""
    if request.node.get_closest_marker(DAEMON_DEMO) is None:
        yield
        return
    shared: Path = request.getfixturevalue("run_shared")
    with FileLock(str(shared / "docker-demo.lock"), timeout=1800):
        yield


@pytest.fixture(scope="session")
def arm64_kit_cache(run_shared: Path) -> None:
    """The arm64 build of the working tree done once per run, before the tests and the
    benchmark that build per-arch: they then find its layers in the daemon's cache
    instead of each building arm64 from nothing at the same time."""
    images.build_once(run_shared, images.ARM64_TAG, arch="arm64")


@pytest.fixture(scope="session")
def kit_image(run_shared: Path) -> str:
    """The kit image built from the working tree on the local bases (once per run)."""
    return images.build_once(run_shared, images.TEST_TAG)


@pytest.fixture(scope="session")
def sdk_home_image(run_shared: Path) -> str:
    """The same image built with `--build-arg BAND_SDK_HOME=/opt/custom-band`."""
    return images.build_once(
        run_shared, images.HOME_OVERRIDE_TAG, ("BAND_SDK_HOME", images.HOME_OVERRIDE)
    )


@pytest.fixture(scope="session")
def sdk_extra_image(run_shared: Path) -> str:
    """The image built with one optional band-sdk extra (`--sdk-extra logging`)."""
    return images.build_once(run_shared, images.EXTRA_TAG, ("SDK_EXTRA", "logging"))


@pytest.fixture
def clone() -> Iterator[Path]:
    """A fresh `git clone` of this repository, as a newcomer makes it (the README tests);
    whatever the walkthrough left running is stopped afterwards."""
    # Where a newcomer keeps a checkout the agent uid can traverse (pytest's own tmp is
    # 0700; the local runtime refuses such a run directory with a clear error).
    parent = scratch_dir("readme-")
    target = parent / "kit"
    subprocess.run(
        ["git", "clone", "--quiet", str(REPO_ROOT), str(target)], check=True, timeout=120
    )
    yield target
    for cleanup in (
        "uv run invoke kit.unprovision --name my-agent",
        "uv run invoke fleet.down",
        "uv run invoke platform.down",
    ):
        if (target / ".run" / "platform.json").exists():
            subprocess.run(
                ["bash", "-c", cleanup],
                cwd=target,
                env=clean_env(),
                capture_output=True,
                timeout=120,
                check=False,
            )
    shutil.rmtree(parent, ignore_errors=True)
