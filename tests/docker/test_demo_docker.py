"""The whole demo offline on the docker runtime, as a user runs it (`uv run invoke demo.up
--runtime docker`, repo root): each breaker tier fires, the transcript shows it, the exit
code says it, and afterwards `leftovers` finds nothing (platform agents and rooms,
containers and their networks, stored keys, egress and credential proxies, processes,
staged workspaces, env files); the canary user key and every agent key never appear in
any output or file. Then `kill -9` of `demo.up` halfway through the sandboxes phase (one
container up, the next half made), and `demo.down`: nothing left either.

One emulator for the module (started like `platform.up`, the canary planted as its key),
one run directory. The kit image is the session's build of the working
tree (`kit_image`), tagged as the demo's `band-python-kit:local` when that tag is absent.

CI time: one scenario per distinct breaker tier (decided after the grace; nudge then the
conductor's add; the message cap; the wall clock, 6 s; the presenter's end), so five of
the six: `silent-architect` ends on the same wall-clock tier as `slow` and runs on the
local runtime only (tests/demo/test_demo_e2e.py). Each run costs about one container
start and venv sync per agent (measured: 46-110 s per scenario at a load average of
11-15 on 2 cores; the sandboxes' sync and band-sdk import dominate).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bandkit.demo import teardown
from bandkit.demo.layout import DemoLayout
from bandkit.dockercli import image_exists
from bandkit.emulator import service
from bandkit.image.facts import LOCAL_TAG
from tests.demo.killing import AGENT_KEY_PREFIX, CANARY, demo_env, down, plant_canary, up_until
from tests.demo.leftovers import leftovers, secrets_in
from tests.runtimes.helpers import REPO, scratch_dir

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@dataclass(frozen=True)
class Expect:
    code: int
    lines: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


SCENARIOS = {
    "happy": Expect(
        0,
        (
            "Maya (PM) → Jordan (Architect)",
            "conductor: Jordan (Architect) is in the room",
            "demo.up: phase verdict:",
            "demo.up: verdict: decided (architect verdict)",
        ),
    ),
    "no-handoff": Expect(
        0,
        (
            "conductor: soft cap reached without a handoff: nudging the PM",
            "conductor: handoff deadline passed: adding Jordan (Architect)",
            "demo.up: verdict: decided (architect verdict)",
        ),
    ),
    "runaway": Expect(3, ("conductor: hard_kill: hard cap of 24 messages reached",)),
    "slow": Expect(
        4, ("conductor: hard_kill: wall clock of 6 s reached",), (("DEMO_WALL_CLOCK_S", "6"),)
    ),
    "presenter-end": Expect(2, ("conductor: terminate_ok: presenter ended the meeting",)),
}


@dataclass
class Platform:
    run_dir: Path
    pid: int


@pytest.fixture(scope="module")
def platform(kit_image: str) -> Iterator[Platform]:
    if not image_exists(LOCAL_TAG):
        subprocess.run(["docker", "tag", kit_image, LOCAL_TAG], check=True, timeout=60)
    run_dir = scratch_dir("demo-docker-")
    plant_canary(run_dir)
    record, _ = service.up(run_dir)
    layout = DemoLayout.for_run_dir(run_dir)
    try:
        yield Platform(run_dir, record.pid)
    finally:
        teardown.down(run_dir, env={}, log=print)  # whatever a failed test left
        service.down(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
        if layout.box_root != run_dir / "demo-boxes":
            shutil.rmtree(layout.box_root, ignore_errors=True)


def assert_nothing_left(platform: Platform, *outputs: str) -> None:
    left = leftovers(platform.run_dir, docker=True, keep_pids=(platform.pid,))
    assert left == [], "\n".join(left)
    roots = (platform.run_dir, DemoLayout.for_run_dir(platform.run_dir).box_root)
    assert secrets_in([CANARY, AGENT_KEY_PREFIX], *outputs, roots=roots) == []


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_each_breaker_tier_on_docker(platform: Platform, scenario: str) -> None:
    expect = SCENARIOS[scenario]
    argv = ["uv", "run", "invoke", "demo.up", "--runtime", "docker", "--headless"]
    argv += ["--scenario", scenario, "--run-dir", str(platform.run_dir)]
    started = time.monotonic()
    done = subprocess.run(
        argv,
        cwd=REPO,
        env=demo_env(**dict(expect.env)),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    print(f"{scenario} on docker: {time.monotonic() - started:.1f} s")
    out = done.stdout
    assert done.returncode == expect.code, out + done.stderr
    assert "docker runtime" in out
    for line in expect.lines:
        assert line in out, line
    transcript = DemoLayout.for_run_dir(platform.run_dir).transcript.read_text()
    for line in expect.lines:
        assert line in transcript, line
    assert_nothing_left(platform, out, done.stderr)


def test_kill_mid_sandboxes_then_down_on_docker_leaves_nothing(platform: Platform) -> None:
    # One container runs, the next one's network, proxies and container are being made.
    killed = up_until(platform.run_dir, "sandbox: band-demo-pm created", runtime="docker")
    done = down(platform.run_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_nothing_left(platform, killed.output, done.stdout, done.stderr)
