"""`kill -9` of `kit.provision --runtime swarm` at each point of its work (the agent
image being loaded into the node, the relay listening, the proxy service made, the agent
service made), each kill followed by another `kit.provision` of the same agent, then one
`cluster.down`: nothing of the cluster is left on this machine (no daemon, namespace,
cgroup or relay process; the host's Docker unchanged), no image archive is left behind,
and one `kit.unprovision` then removes the platform agent and the records, so the run is
clean. And a sandbox between an exit and its restart counts as running, not stopped.

Marked `cluster` (run by `nox -s cluster_tests`): root and a host Docker daemon.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bandkit import processes
from bandkit.image.facts import LOCAL_TAG
from bandkit.runtimes.base import SandboxStatus
from bandkit.runtimes.swarm import SwarmRuntime
from tests.kit.support import Home
from tests.runtimes.helpers import scratch_dir
from tests.support import images
from tests.support.cluster import host_state, leftovers, on_node
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster
NAME = "killed-agent"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(kit_image: str) -> Iterator[Home]:
    images.ensure_local_tag(kit_image)
    root = scratch_dir("swarm-kill-")
    result = Home(root, root / ".run")
    try:
        yield result
    finally:
        result.invoke("cluster.down")
        result.invoke("kit.unprovision", "--name", NAME)
        result.invoke("platform.down")
        images.remove_agent_images(root)
        shutil.rmtree(root, ignore_errors=True)


def _box(home: Home) -> Path:
    return home.run_dir / "runtimes" / "swarm" / NAME


def _services() -> list[str]:
    return on_node(1, "service", "ls", "--format", "{{.Name}}", check=False).split()


def _image_loading(home: Home) -> bool:
    """A node's `docker load` of the agent image runs (the cluster lane runs one test at
    a time: no other load is under way)."""
    load = [b"image", b"load", b"--quiet"]
    return processes.scan(lambda p: p.cmdline.split(b"\0")[1:4] == load) != []


def _relay_listening(home: Home) -> bool:
    return (_box(home) / "relay.json").exists()


def _proxy_service_made(home: Home) -> bool:
    return any(name.startswith("bkp-") for name in _services())


def _agent_service_made(home: Home) -> bool:
    return NAME in _services()


POINTS = (_image_loading, _relay_listening, _proxy_service_made, _agent_service_made)


def test_kill_9_of_provision_at_each_point_then_cluster_down_leaves_nothing(home: Home) -> None:
    before = host_state()
    home.ok("platform.up")
    home.ok("cluster.up", "--nodes", "1", "--no-image")  # the agent image is loaded first
    ws = home.workspace(NAME)
    for point in POINTS:
        _provision_killed_at(home, ws, point)
    home.ok("cluster.down")
    assert leftovers(home.run_dir) == []
    wait_for(
        lambda: processes.tagged_pids("bandkit-swarm-relay:", prefix=True) == [],
        timeout=20,
        what="the relay to end with the cluster",
    )
    assert host_state() == before
    gone = home.ok("kit.unprovision", "--name", NAME)
    assert "removed agent:" in gone.stdout, gone.stdout + gone.stderr
    assert home.agents() == []
    assert list((home.run_dir / "provision").glob("*")) == []


def _provision_killed_at(home: Home, ws: Path, point: Callable[[Home], bool]) -> None:
    argv = [sys.executable, "-m", "invoke", "kit.provision", "--run-dir", str(home.run_dir)]
    argv += ["--name", NAME, "--workspace", str(ws), "--description", "killed midway"]
    argv += ["--runtime", "swarm", "--agent-image"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAND_")}
    proc = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: point(home) or proc.poll() is not None, timeout=180, what="the point")
        assert proc.poll() is None, f"kit.provision ended before {point.__name__}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def test_a_sandbox_waiting_out_its_restart_delay_is_running_not_stopped(home: Home) -> None:
    """Between an exit and its restart (the restart delay) swarm's new task waits with
    desired state `ready`: the sandbox is on its way up, and `kit.provision`, which gives
    up on a stopped sandbox, must not see it stopped (an agent whose first connect failed
    under load was reported failed while swarm was restarting it)."""
    home.ok("cluster.up", "--nodes", "1")
    argv = ["service", "create", "--detach", "--name", NAME, "--restart-condition", "any"]
    argv += ["--restart-delay", "30s", "--endpoint-mode", "dnsrr", "--no-resolve-image"]
    on_node(1, *argv, "--entrypoint", "/bin/sh", LOCAL_TAG, "-c", "exit 3")

    def waiting() -> bool:
        states = on_node(1, "service", "ps", "--format", "{{.DesiredState}}", NAME).split()
        return "Ready" in states and "Shutdown" in states

    wait_for(waiting, timeout=60, what="the task to fail and its restart to wait")
    runtime = SwarmRuntime(home.run_dir / "runtimes" / "swarm")
    assert runtime.status(NAME) is SandboxStatus.RUNNING
    on_node(1, "service", "rm", NAME)
