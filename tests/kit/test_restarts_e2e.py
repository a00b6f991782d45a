"""Restarts are routine (issue 26), on the local runtime, as a user runs the commands.

- `platform.up`, `kit.provision`, `kill -9` the platform, `platform.up`: it comes back on
  the same address from its state, and the same agent answers `kit.ping` with no other
  command; `kit.unprovision` then leaves nothing. Before: a new port, and both failed.
- A reboot, simulated: every host process the kit started (the platform, each box's
  agent and credential proxy) killed. `kit.status` shows what is down; `kit.resume --all`
  brings every agent back to answering; `kit.status` is then all up.
- Teardown always finishes: on a platform that is down with its state on disk the records
  are kept and the message says how to bring it back; `--forget-unreachable` clears them,
  listed; once its state file is gone they are moot and cleared. No manifest is edited.

The boxes of a run directory the agent uid cannot enter live under the local runtime's
`BOXES_HOME`: processes are found by the tags naming that boxes root.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from bandkit import processes
from bandkit.emulator import service
from bandkit.runtimes.local import LocalRuntime
from launcher.constants import PLACEHOLDER_AGENT_ID as PLACEHOLDER
from tests.kit.support import Home, agent_id_in, kill, kill_platform
from tests.runtimes.helpers import scratch_dir
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e


def box_pids(home: Home) -> list[int]:
    """Every process of this run's boxes: agents, launchers, credential proxies."""
    root = str(LocalRuntime(home.run_dir / "runtimes" / "local").boxes_root()).encode()
    tag = f"{processes.TAG_ENV}=".encode()
    return processes.scan(lambda p: any(e.startswith(tag) and root in e for e in p.environ))


@pytest.fixture
def home(agent_sdk: None) -> Iterator[Home]:
    root = scratch_dir("kit-restarts-")
    run_dir = root / ".run"
    result = Home(root, run_dir)
    try:
        yield result
    finally:  # whatever a failed test left: its boxes, its platform, its files
        for pid in box_pids(result):
            kill(pid)
        if (run_dir / service.RUN_FILE).exists():
            service.down(run_dir)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(LocalRuntime(run_dir / "runtimes" / "local").boxes_root(), ignore_errors=True)


def test_kill_9_the_platform_then_platform_up_the_agent_answers(home: Home) -> None:
    home.ok("platform.up")
    before = home.record()
    agent_id = home.provision("my-agent")

    kill_platform(home)
    home.ok("platform.up")
    after = home.record()
    assert after["rest_url"] == before["rest_url"]  # the same address
    assert after["platform_id"] == before["platform_id"]  # the same platform, from its state

    pinged = home.ok("kit.ping", "--name", "my-agent")  # no other command in between
    assert pinged.stdout.startswith("echo: @my-agent ping:"), pinged.stdout

    done = home.ok("kit.unprovision", "--name", "my-agent")
    assert f"removed agent:{before['rest_url']}#my-agent" in done.stdout
    assert "my-agent" not in home.agents()
    assert box_pids(home) == []
    assert not (home.run_dir / "provision" / "my-agent").exists()
    assert agent_id_in(home.root / "my-agent") == PLACEHOLDER, agent_id
    home.ok("platform.down")


def test_a_simulated_reboot_then_kit_resume_all(home: Home) -> None:
    home.ok("platform.up")
    names = ["agent-a", "agent-b"]
    for name in names:
        home.provision(name)
    assert home.ok("kit.status").stdout.count(" DOWN ") == 0

    # The reboot: every host process the kit started dies (no clean stop anywhere).
    killed = box_pids(home)
    assert len(killed) >= 2 * len(names)  # each box: its agent and its credential proxy
    for pid in killed:
        kill(pid)
    kill_platform(home)
    wait_for(lambda: box_pids(home) == [], 10, "the boxes' processes to die")

    status = home.invoke("kit.status")
    assert status.returncode == 1, status.stdout + status.stderr
    for part in ("platform", "agent", "credential proxy", "connected"):
        assert status.stdout.count(f"  {part}") == len(names), status.stdout
    assert status.stdout.count("DOWN") == 4 * len(names), status.stdout
    assert "kit.resume --all" in status.stdout

    resumed = home.ok("kit.resume", "--all")
    assert "the local platform started again from its state" in resumed.stdout
    for name in names:
        assert f"kit.resume: {name}: brought back (local): agent, credential proxy" in (
            resumed.stdout
        )
    assert f"kit.resume: {len(names)} agents connected" in resumed.stdout

    status = home.ok("kit.status")  # all green: exit 0, no part down
    assert "DOWN" not in status.stdout
    assert f"all {len(names)} agents up" in status.stdout
    for name in names:
        pinged = home.ok("kit.ping", "--name", name)
        assert pinged.stdout.startswith(f"echo: @{name} ping:"), pinged.stdout

    again = home.ok("kit.resume", "--all")  # idempotent: nothing was down
    assert "every part of its local sandbox was up" in again.stdout
    for name in names:
        home.ok("kit.unprovision", "--name", name)
    assert box_pids(home) == []
    home.ok("platform.down")


def test_teardown_finishes_whatever_became_of_the_platform(home: Home) -> None:
    home.ok("platform.up")
    kept_name, forgot_name = "kept-agent", "forgot-agent"
    home.provision(kept_name)
    home.provision(forgot_name)
    kill_platform(home)

    # Down with its state on disk: it may come back, so the records stay, and say how.
    kept = home.invoke("kit.unprovision", "--name", kept_name)
    assert kept.returncode == 1, kept.stdout + kept.stderr
    assert f"removed sandbox:local/{kept_name}" in kept.stdout  # the host side went anyway
    failed = [line for line in kept.stdout.splitlines() if line.startswith("FAILED agent:")]
    assert len(failed) == 1, kept.stdout
    assert "is not running; its state is kept in" in failed[0]
    assert f"`uv run invoke platform.up --run-dir {home.run_dir}` brings it back" in failed[0]
    assert "--forget-unreachable drops this record" in failed[0]

    # --forget-unreachable: each record listed as it is cleared; nothing else is asked.
    forgot = home.ok("kit.unprovision", "--name", forgot_name, "--forget-unreachable")
    cleared = [line for line in forgot.stdout.splitlines() if line.startswith("cleared ")]
    assert {line.split(":", 1)[0] for line in cleared} == {"cleared agent", "cleared room"}
    assert all("forgotten (--forget-unreachable)" in line for line in cleared)
    assert agent_id_in(home.root / forgot_name) == PLACEHOLDER

    # Its state gone (deleted): what was recorded on it is moot, cleared, said so.
    (home.run_dir / service.STATE_FILE).unlink()
    moot = home.ok("kit.unprovision", "--name", kept_name)
    assert "cleared agent:" in moot.stdout
    assert "its state file" in moot.stdout
    assert "is gone" in moot.stdout
    assert agent_id_in(home.root / kept_name) == PLACEHOLDER
    assert not (home.run_dir / "provision").exists() or not any(
        (home.run_dir / "provision").iterdir()
    )
    assert box_pids(home) == []
    assert "nothing provisioned" in home.ok("kit.status").stdout
