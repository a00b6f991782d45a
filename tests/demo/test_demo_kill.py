"""`kill -9` of `uv run invoke demo.up` at each phase, then `uv run invoke demo.down`,
leaves nothing (`leftovers`: platform agents and rooms, sandboxes, secrets, rules,
processes, temp workspaces, the run's files), and the canary user key, like every agent
key, never appears in any output, log, manifest or transcript. Local runtime, the
demo's own emulator (started by `demo.up` as on a fresh machine, stopped by `demo.down`).
The docker runtime's kills are in tests/docker/test_demo_docker.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.demo import teardown
from bandkit.demo.layout import DemoLayout
from bandkit.demo.phases import PHASES
from bandkit.emulator import service
from bandkit.runtimes import processes
from bandkit.runtimes.hostbox import box_tag
from tests.demo.killing import AGENT_KEY_PREFIX, CANARY, down, phase_marker, plant_canary, up_until
from tests.demo.leftovers import leftovers, secrets_in
from tests.runtimes.helpers import agent_sdk_env, scratch_dir

pytestmark = pytest.mark.slow

# Where to kill: the line that starts each phase, and three lines inside the longer ones
# (one agent registered with its key stored, one sandbox running, the room created).
KILL_AT = [phase_marker(phase) for phase in PHASES] + [
    "provision: Maya (PM) is agent",
    "sandbox: band-demo-pm created",
    "conductor: room page",
]


@pytest.fixture(scope="module")
def run_dir() -> Iterator[Path]:
    with agent_sdk_env():
        path = scratch_dir("demo-kill-")
        plant_canary(path)
        layout = DemoLayout.for_run_dir(path)
        try:
            yield path
        finally:  # whatever a failed test left
            teardown.down(path, env={}, log=print)
            boxes = layout.runtimes / "local" / "boxes"
            for box in boxes.glob("band-demo-*"):
                processes.terminate_tagged(box_tag(box))
            service.down(path)
            shutil.rmtree(path, ignore_errors=True)
            if layout.box_root != path / "demo-boxes":
                shutil.rmtree(layout.box_root, ignore_errors=True)


@pytest.mark.parametrize("marker", KILL_AT)
def test_kill_at_each_phase_then_down_leaves_nothing(run_dir: Path, marker: str) -> None:
    killed = up_until(run_dir, marker)
    roots = (run_dir, DemoLayout.for_run_dir(run_dir).box_root)
    # What the dead run left (agent logs, manifest, transcript) holds no key either.
    assert secrets_in([CANARY, AGENT_KEY_PREFIX], killed.output, roots=roots) == []
    done = down(run_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert leftovers(run_dir) == [], killed.output[-2000:] + done.stdout
    assert secrets_in([CANARY, AGENT_KEY_PREFIX], done.stdout, done.stderr, roots=roots) == []
    again = down(run_dir)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "nothing to remove" in again.stdout
