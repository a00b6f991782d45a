"""Every benchmark still runs: `python -m bandkit.bench --quick NAME` (one iteration, the
smallest sizes), as `nox -s bench -- --quick NAME` runs it, exits 0 with its figure lines
and no traceback. Those that need no Docker run in the e2e lane with Docker switched off
(`BANDKIT_BENCH_DOCKER=0`: their Docker parts say they were skipped); those that need it
run in the docker lane with the daemon. A part whose upstream comparison cannot run here
says so in a line and still passes. (`newcomer`'s `build push` retags the user's
`band-python-kit:local`, so only its local walk runs here; `smoke`'s docker variants
restart the daemon, so quick mode runs the local one alone; `demo`'s quick mode runs its
docker part alone when Docker is there, its local part in the e2e lane.)"""

from __future__ import annotations

import os
import re
import sys
import time

import pytest

from bandkit.bench import BENCHES, DOCKER_ENV, QUICK_ENV
from bandkit.dockercli import docker_answers
from tests import commands
from tests.support import images

BENCH_TIMEOUT_S = 850.0
DEMO_BENCHES = ("demo",)  # run demo.up on Docker: the band-demo-* containers
# Build the kit for arm64 on the main daemon: after the run's one arm64 build (a fresh
# machine's CI ran the release bench's cold arm64 build beside that one: 443 s and 462 s).
PER_ARCH_BENCHES = ("image_multiarch", "release")


def _quick(name: str, **env: str) -> list[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("BAND_", "DEMO_"))}
    clean.pop(QUICK_ENV, None)
    started = time.monotonic()
    done = commands.run(
        [sys.executable, "-m", "bandkit.bench", "--quick", name],
        env={**clean, "PYTHONUNBUFFERED": "1", **env},
        timeout=BENCH_TIMEOUT_S,
    )
    print(f"bench {name} --quick: {time.monotonic() - started:.1f} s\n{done.stdout}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == f"== {name}", done.stdout
    figures = lines[1:]
    assert figures, f"{name} printed no figure"
    failed = [line for line in figures if re.search(r"\bFAIL\b|\bfailed:", line)]  # a verdict
    assert not failed, failed
    return figures


@pytest.mark.e2e
@pytest.mark.parametrize("name", [n for n, b in BENCHES.items() if "e2e" in b.lanes])
def test_each_benchmark_runs_in_quick_mode_without_docker(name: str) -> None:
    _quick(name, **{DOCKER_ENV: "0"})


@pytest.mark.docker
@pytest.mark.parametrize(
    "name",
    [
        # the demo's container names are fixed: one demo on the daemon at a time
        pytest.param(n, marks=[pytest.mark.daemon_demo] if n in DEMO_BENCHES else [])
        for n, b in BENCHES.items()
        if "docker" in b.lanes
    ],
)
def test_each_docker_benchmark_runs_in_quick_mode(
    name: str, request: pytest.FixtureRequest
) -> None:
    if name in PER_ARCH_BENCHES:
        request.getfixturevalue("arm64_kit_cache")  # not one more arm64 build from nothing
    assert docker_answers(), (
        "no Docker daemon answers: `uv run invoke ci.prepare --lane docker_tests`"
    )
    figures = _quick(name)
    assert not [line for line in figures if "skipped: no Docker" in line], figures


@pytest.mark.cluster
@pytest.mark.parametrize("name", [n for n, b in BENCHES.items() if "cluster" in b.lanes])
def test_each_cluster_benchmark_runs_in_quick_mode(name: str, kit_image: str) -> None:
    images.ensure_local_tag(kit_image)
    figures = _quick(name)
    assert not [line for line in figures if "skipped" in line], figures
