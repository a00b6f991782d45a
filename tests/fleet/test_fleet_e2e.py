"""The converge loop on the local runtime, as a user runs the tasks: a `fleet.up` killed
with `kill -9` midway is finished by the next `fleet.up`; a changed workspace is updated
(the same agent, answering), `--dry-run` changes nothing, `--prune` removes an agent the
file dropped; `fleet.down` leaves no platform agent, record, copy or process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator

import pytest

from bandkit.fleet import converge
from bandkit.runtimes.local import LocalRuntime
from tests.demo.leftovers import process_leftovers
from tests.kit.support import Home
from tests.runtimes.helpers import scratch_dir
from tests.support import readme
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e
NAMES = ("one", "two", "three")


@pytest.fixture
def home(agent_sdk: None) -> Iterator[Home]:
    root = scratch_dir("fleet-")
    run_dir = root / ".run"
    result = Home(root, run_dir)
    try:
        yield result
    finally:
        if (run_dir / "fleet").exists():
            result.invoke("fleet.down")
        result.invoke("platform.down")
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(LocalRuntime(run_dir / "runtimes" / "local").boxes_root(), ignore_errors=True)


def _file(home: Home, names: tuple[str, ...]) -> str:
    lines = ["version: 1", "agents:"]
    for name in names:
        if not (home.root / name).exists():
            home.workspace(name)
        lines += [
            f"  - name: {name}",
            f"    description: the agent {name} of the test fleet",
            f"    workspace: {name}",
        ]
    path = home.root / "fleet.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _kill_midway(home: Home, file: str) -> None:
    """`fleet.up` one at a time, `kill -9` (its whole process group) once an agent is
    registered: a member recorded, not done."""
    env = readme.clean_env()
    argv = ["uv", "run", "invoke", "fleet.up", "--file", file, "--runtime", "local"]
    argv += ["--parallel", "1", "--run-dir", str(home.run_dir)]
    proc = subprocess.Popen(
        argv,
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "registered agent" in line:
            os.killpg(proc.pid, signal.SIGKILL)
            break
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def _pings(home: Home, names: tuple[str, ...]) -> None:
    for name in names:
        pinged = home.ok("kit.ping", "--name", name)
        assert pinged.stdout.startswith(f"echo: @{name} ping:"), pinged.stdout


def test_a_killed_fleet_up_is_finished_by_the_next_and_changes_converge(home: Home) -> None:
    home.ok("platform.up")
    file = _file(home, NAMES)
    _kill_midway(home, file)

    again = home.ok("fleet.up", "--file", file, "--runtime", "local")
    assert "one: create (an earlier run stopped before it ended)" in again.stdout, again.stdout
    assert "fleet.up: 3 of 3 change(s) made" in again.stdout  # each proved connected
    noop = home.ok("fleet.up", "--file", file, "--runtime", "local")
    assert "fleet.up: nothing to do: 3 agent(s) as the file says" in noop.stdout

    ids = {r["name"]: r for r in _status(home)}
    (home.root / "one" / "main.py").write_text(
        (home.root / "one" / "main.py").read_text() + "\n# changed\n"
    )
    file = _file(home, ("one", "three"))
    state = converge.state_path(home.run_dir)
    before = state.read_bytes()
    dry = home.ok("fleet.up", "--file", file, "--runtime", "local", "--dry-run")
    assert "  ~ one: update (source changed)" in dry.stdout
    assert "  ! two: kept (not in the file; --prune removes it)" in dry.stdout
    assert "  = three: unchanged" in dry.stdout
    assert state.read_bytes() == before

    pruned = home.ok("fleet.up", "--file", file, "--runtime", "local", "--prune")
    assert "fleet.up: one: updated, connected" in pruned.stdout
    assert "fleet.up: two: removed" in pruned.stdout
    assert "two" not in home.agents()
    _pings(home, ("one",))  # the updated agent answers
    copy = converge.copy_dir(home.run_dir, "one")
    assert "# changed" in (copy / "main.py").read_text()
    rows = {r["name"]: r for r in _status(home)}
    assert sorted(rows) == ["one", "three"]
    assert rows["one"]["connected"] == "yes"
    assert ids["one"]["image"] == rows["one"]["image"] == "-"

    down = home.ok("fleet.down")
    assert "fleet.down: 2 agent(s) removed" in down.stdout
    assert home.agents() == []
    assert not (home.run_dir / "fleet").exists()
    assert list((home.run_dir / "provision").glob("*")) == []
    wait_for(
        lambda: process_leftovers((home.run_dir,), keep_pids=(home.platform_pid(),)) == [],
        10,
        "the fleet's processes to end",
    )
    assert home.ok("fleet.status").stdout.startswith("fleet.status: no fleet in")


def _status(home: Home) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = json.loads(home.ok("fleet.status", "--json").stdout)
    return rows
