"""`kill -9` of `uv run invoke demo.up` at each distinct state of its run (what its
manifest holds), then `uv run invoke demo.down`, leaves nothing (`leftovers`: platform
agents and rooms, sandboxes, secrets, rules, processes, temp workspaces, the run's
files), and the canary user key, like every agent key, never appears in any output,
log, manifest or transcript. Local runtime, the
demo's own emulator (started by `demo.up` as on a fresh machine, stopped by `demo.down`).
The docker runtime's kills are in tests/docker/test_demo_docker.py.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit import processes
from bandkit.demo import teardown
from bandkit.demo.layout import DemoLayout
from bandkit.emulator import service
from bandkit.runtimes.hostbox import box_tag
from tests.demo.leftovers import leftovers, secrets_in
from tests.demo.support import AGENT_KEY_PREFIX, CANARY, down, phase_marker, plant_canary, up_until
from tests.runtimes.helpers import scratch_dir

pytestmark = pytest.mark.e2e


# Where to kill: one point per distinct state of the run's manifest (what teardown has to
# undo). Phases whose start records nothing new are not repeated: preflight is provision
# (nothing recorded yet), sandboxes is egress and secrets, meeting is connect, and verdict
# and teardown start with what the room page left.
KILL_AT = [
    phase_marker("provision"),  # the manifest is open, nothing is recorded yet
    "provision: Maya (PM) is agent",  # one agent registered, its key stored
    phase_marker("egress and secrets"),  # the three agents, keys, workspaces, the platform
    "sandbox: band-demo-pm created",  # one sandbox running, the next being made
    phase_marker("connect"),  # the three sandboxes
    "conductor: room page",  # the room: everything a run makes
]


@pytest.fixture(scope="module")
def run_dir(agent_sdk: None) -> Iterator[Path]:
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
