"""A platform that dies never strands a demo run (issue 26).

- The demo's own emulator (started by `demo.up` on a machine with none) is `kill -9`ed
  during the meeting (an OOM kill): `demo.up` fails that meeting but its teardown starts
  the emulator again from its state, on the same address, removes everything there and
  stops it; killed together with `demo.up`, `demo.down` does the same. Then a new
  `demo.up` reaches a verdict. Before: `demo.down` failed on every run ("All connection
  attempts failed") and `demo.up` then refused forever ("an unfinished demo run is
  recorded").
- A platform the user started (`platform.up`) dies with the run's agents and room on it:
  it may come back (its state is on disk), so `demo.down` keeps the records and says
  exactly that; `demo.down --forget-unreachable` clears each one, listed (and removes
  nothing on the platform); then `demo.up` runs again (on its own emulator, from the same
  state: the stale agents are swept) and reaches a verdict.

Local runtime; the canary user key is the platform's, and never appears in any output.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.demo import teardown
from bandkit.demo.layout import DemoLayout
from bandkit.emulator import service
from tests.demo.leftovers import leftovers, secrets_in
from tests.demo.support import (
    AGENT_KEY_PREFIX,
    CANARY,
    demo_env,
    down,
    invoke,
    kill_platform,
    plant_canary,
    up_then,
    up_until,
)
from tests.runtimes.helpers import scratch_dir

pytestmark = pytest.mark.e2e

ROOM_PAGE = "conductor: room page"  # the meeting is on: the room and the three agents


@pytest.fixture
def run_dir(agent_sdk: None) -> Iterator[Path]:
    path = scratch_dir("demo-restart-")
    plant_canary(path)
    layout = DemoLayout.for_run_dir(path)
    try:
        yield path
    finally:  # whatever a failed test left
        teardown.down(path, env={}, log=print)
        service.down(path)
        shutil.rmtree(path, ignore_errors=True)
        if layout.box_root != path / "demo-boxes":
            shutil.rmtree(layout.box_root, ignore_errors=True)


def _verdict(run_dir: Path) -> str:
    again = invoke("demo.up", "--runtime", "local", "--headless", "--scenario", "happy",
                   "--run-dir", str(run_dir), env=demo_env())  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    assert "demo.up: verdict: decided (architect verdict)" in again.stdout
    return again.stdout


def test_the_demos_own_emulator_killed_mid_meeting(run_dir: Path) -> None:
    # Killed alone: the meeting fails, the run's own teardown brings the platform back.
    killed = up_then(run_dir, ROOM_PAGE, lambda: kill_platform(run_dir))
    assert killed.returncode == 1, killed.output[-3000:]
    assert "teardown: the demo's platform had stopped; started it again" in killed.output
    assert "teardown: FAILED" not in killed.output
    assert leftovers(run_dir) == [], killed.output[-3000:]
    done = down(run_dir)
    assert done.returncode == 0, done.stdout + done.stderr

    # Killed with demo.up (the case): demo.down brings it back and finishes.
    both = up_until(run_dir, ROOM_PAGE)
    kill_platform(run_dir)
    done = down(run_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "started it again from its state" in done.stdout
    assert leftovers(run_dir) == [], both.output[-2000:] + done.stdout
    again = down(run_dir)
    assert "nothing to remove" in again.stdout, again.stdout

    out = _verdict(run_dir)
    assert leftovers(run_dir) == []
    texts = [killed.output, both.output, done.stdout, done.stderr, out]
    roots = (run_dir, DemoLayout.for_run_dir(run_dir).box_root)
    assert secrets_in([CANARY, AGENT_KEY_PREFIX], *texts, roots=roots) == []


def test_forget_unreachable_then_the_demo_runs_again(run_dir: Path) -> None:
    service.up(run_dir)  # the user's own platform: the demo leaves it running
    killed = up_until(run_dir, ROOM_PAGE)
    kill_platform(run_dir)  # it may come back: its state is on disk

    kept = down(run_dir)
    assert kept.returncode == 1, kept.stdout + kept.stderr
    failed = [line for line in kept.stdout.splitlines() if "teardown: FAILED" in line]
    assert any(line.startswith("teardown: FAILED agent:") for line in failed), kept.stdout
    assert any(line.startswith("teardown: FAILED room:") for line in failed), kept.stdout
    for line in failed:
        if line.startswith(("teardown: FAILED agent:", "teardown: FAILED room:")):
            assert "is not running; its state is kept in" in line
            assert f"`uv run invoke platform.up --run-dir {run_dir}` brings it back" in line
            assert "--forget-unreachable drops this record" in line
    assert not any("removed sandbox" in line for line in failed)
    assert "removed sandbox:local/band-demo-pm" in kept.stdout  # the host side went anyway
    again = invoke("demo.up", "--runtime", "local", "--headless", "--run-dir", str(run_dir),
                   env=demo_env())  # fmt: skip
    assert again.returncode != 0
    assert "an unfinished demo run is recorded" in again.stdout + again.stderr

    forgot = down(run_dir, "--forget-unreachable")
    assert forgot.returncode == 0, forgot.stdout + forgot.stderr
    cleared = [line for line in forgot.stdout.splitlines() if "teardown: cleared" in line]
    assert len([line for line in cleared if "cleared agent:" in line]) == 3, forgot.stdout
    assert len([line for line in cleared if "cleared room:" in line]) == 1, forgot.stdout
    assert all("forgotten (--forget-unreachable)" in line for line in cleared)

    out = _verdict(run_dir)  # its own emulator, from the same state, on the same port
    assert out.count("sweep: deleted stale demo agent") == 3, out[-3000:]
    # Forgetting a record removes nothing: the killed run's room is still in the state,
    # the one thing left (the platform came back after all).
    left = leftovers(run_dir)
    assert len(left) == 1, left
    assert left[0].startswith("platform room Design Review"), left
    texts = [killed.output, kept.stdout, forgot.stdout, out]
    roots = (run_dir, DemoLayout.for_run_dir(run_dir).box_root)
    assert secrets_in([CANARY, AGENT_KEY_PREFIX], *texts, roots=roots) == []
