"""The simulator's sandboxes really run the agent: `daemon stop` kills it, `daemon start`
leaves the sandbox stopped, `sbx run --name` (or `exec`) brings the agent back, and
`stop` delivers SIGTERM so it exits cleanly (reference 1.2: daemon, run, stop)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest

from bandkit import processes
from bandkit.runtimes import hostbox
from tests.fakes.simharness import Sim, simulator
from tests.runtimes.helpers import Platform, echo_workspace, emulator, make_kit, scratch_dir


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    from pathlib import Path

    with emulator(Path(tmp_path_factory.mktemp("emu"))) as p:
        yield p


def vm_tag(sim: Sim, name: str) -> str:
    """The process tag of the sandbox's box (the simulator keeps it under vms/<id>)."""
    box_id = json.loads(sim("ls", "--json").stdout)["sandboxes"][0]["id"]
    return hostbox.box_tag(sim.state / "vms" / box_id)


@pytest.mark.e2e  # a restart drill: the simulated daemon restarted under a real agent
def test_daemon_restart_and_run_bring_the_agent_back(platform: Platform, agent_sdk: None) -> None:
    scratch = scratch_dir("sim-agent-")
    agent_id, key = platform.register("sim-daemon")
    try:
        with simulator() as sim:
            sim("policy", "init", "balanced", check=True)
            ws = echo_workspace(
                scratch, agent_id=agent_id, rest_url=platform.rest_url, ws_url=platform.ws_url
            )
            sim(
                "secret",
                "set-custom",
                "box",
                "--host",
                "127.0.0.1",
                "--env",
                "BAND_API_KEY",
                "--placeholder",
                "proxy-managed",
                "--value",
                key,
                check=True,
            )
            sim(
                "create",
                "--name",
                "box",
                "--kit",
                str(  # 0.35: the kit's legacy directory
                    make_kit(
                        scratch,
                        {"BAND_REST_URL": platform.rest_url, "BAND_WS_URL": platform.ws_url},
                    )
                    / "sbx-below-0.42.1"
                ),
                "band-python-kit",
                str(ws),
                check=True,
            )
            tag = vm_tag(sim, "box")
            room = platform.room_with(agent_id)
            assert platform.round_trip(room, agent_id, timeout=120).startswith("echo: ")
            assert processes.tagged_pids(tag)

            sim("daemon", "stop", check=True)
            assert processes.tagged_pids(tag) == []  # daemon stop kills the sandbox VMs
            sim("daemon", "start", "-d", check=True)
            assert json.loads(sim("ls", "--json").stdout)["sandboxes"][0]["status"] == "stopped"
            assert processes.tagged_pids(tag) == []

            sim("run", "--name", "box", check=True)
            assert platform.round_trip(room, agent_id, timeout=120).startswith("echo: ")

            sim("stop", "box", check=True)
            assert processes.tagged_pids(tag) == []
            box_id = json.loads(sim("ls", "--json").stdout)["sandboxes"][0]["id"]
            log = (sim.state / "vms" / box_id / "startup.log").read_text()
            assert "shutdown signal received" in log  # stop delivered SIGTERM to the agent
            assert log.rstrip().splitlines()[-1].endswith("echo agent stopped")
            sim("rm", "-f", "box", check=True)
            assert not (sim.state / "vms" / box_id).exists()
    finally:
        platform.delete_agent(agent_id)
        shutil.rmtree(scratch, ignore_errors=True)
