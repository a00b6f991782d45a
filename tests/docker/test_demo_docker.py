"""The whole demo offline on the docker runtime, as a user runs it (`uv run invoke demo.up
--runtime docker`, repo root): a verdict, and a hard kill mid-meeting; the transcript shows
each, the exit code says it, and afterwards `leftovers` finds nothing (platform agents and
rooms, containers and their networks, stored keys, egress and credential proxies,
processes, staged workspaces, env files); the canary user key and every agent key never
appear in any output or file. Then `kill -9` of `demo.up` halfway through the sandboxes
phase (one container up, the next half made), and `demo.down`: nothing left either.
While `happy` runs, `demo.logs --follow` reads the three containers' logs, each line with
its role, and ends with the run.

One emulator for the module (started like `platform.up`, the canary planted as its key),
one run directory. The kit image is the session's build of the working
tree (`kit_image`), tagged as the demo's `band-python-kit:local` when that tag is absent.

Which tiers run here: the breaker and the conductor run on the host and are the same
whatever the runtime, so every tier is proven on the local runtime
(tests/demo/test_demo_e2e.py) and in process (tests/demo/test_conductor.py). On docker:
`happy` (the agents hand off and rule from their containers) and `runaway` (the hard cap
tears the containers down while the agents are still speaking).
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bandkit.demo import teardown
from bandkit.demo.layout import DemoLayout
from bandkit.emulator import service
from tests.demo.leftovers import leftovers, secrets_in
from tests.demo.support import (
    AGENT_KEY_PREFIX,
    CANARY,
    Live,
    demo_env,
    down,
    live_invoke,
    plant_canary,
    up_until,
)
from tests.runtimes.helpers import scratch_dir
from tests.support import images
from tests.support.wait import wait_for

pytestmark = [pytest.mark.docker, pytest.mark.daemon_demo]


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
    "runaway": Expect(3, ("conductor: hard_kill: hard cap of 24 messages reached",)),
}


@dataclass
class Platform:
    run_dir: Path
    pid: int


@pytest.fixture(scope="module")
def platform(kit_image: str) -> Iterator[Platform]:
    images.ensure_local_tag(kit_image)  # absent, or built before the entrypoint took a gid
    run_dir = scratch_dir("demo-docker-")
    plant_canary(run_dir)
    record, _ = service.up(run_dir)
    layout = DemoLayout.for_run_dir(run_dir)
    try:
        yield Platform(run_dir, record.pid)
    finally:
        teardown.down(run_dir, env={}, log=print)  # whatever a failed test left
        service.down(run_dir)
        images.remove_agent_images(run_dir.resolve(), layout.box_root.resolve())
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
    """`happy` is followed from "another terminal" too: `demo.logs --follow` reads the
    containers (`docker logs`, the launcher log inside) and ends with the run."""
    expect = SCENARIOS[scenario]
    where = ("--run-dir", str(platform.run_dir))
    args = ("demo.up", "--runtime", "docker", "--headless", "--scenario", scenario, *where)
    started = time.monotonic()
    run = live_invoke(*args, env=demo_env(**dict(expect.env)), timeout_s=600)
    follow: Live | None = None
    try:
        if scenario == "happy":
            wait_for(lambda: run.line_or_end(lambda t: "logs --follow" in t), 300, "the logs hint")
            follow = live_invoke("demo.logs", "--follow", *where, env=demo_env(), timeout_s=600)
        code = run.wait(600)
        followed = follow.output if follow is not None and follow.wait(60) == 0 else ""
    finally:
        run.kill()
        if follow is not None:
            follow.kill()
    print(f"{scenario} on docker: {time.monotonic() - started:.1f} s")
    out = run.output
    assert code == expect.code, out
    assert "docker runtime" in out
    for line in expect.lines:
        assert line in out, line
    transcript = DemoLayout.for_run_dir(platform.run_dir).transcript.read_text()
    for line in expect.lines:
        assert line in transcript, line
    if follow is not None:
        assert followed, follow.output
        for role in ("pm", "dev", "architect"):
            assert re.search(rf"^{role} +\| .*demo agent ready", followed, re.M), followed
        assert re.search(r"^architect/launcher +\| ", followed, re.M), followed
        assert followed.splitlines()[-1] == "demo.logs: the run ended (its manifest is gone)"
    assert_nothing_left(platform, out, followed)


def test_kill_mid_sandboxes_then_down_on_docker_leaves_nothing(platform: Platform) -> None:
    # One container runs, the next one's network, proxies and container are being made.
    killed = up_until(platform.run_dir, "sandbox: band-demo-pm created", runtime="docker")
    done = down(platform.run_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert_nothing_left(platform, killed.output, done.stdout, done.stderr)
