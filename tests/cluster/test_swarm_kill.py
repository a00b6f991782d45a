"""`kill -9` of `kit.provision --runtime swarm` once its agent service is made (its
networks, secret, config, relay and proxy are made before it), then one `cluster.down`:
nothing of the cluster is left on this machine (no daemon, namespace, cgroup or relay
process; the host's Docker unchanged), and one `kit.unprovision` then removes the
platform agent and the records, so the run is clean.

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


def _service_made(home: Home) -> bool:
    names = on_node(1, "service", "ls", "--format", "{{.Name}}", check=False).split()
    return NAME in names


def test_kill_9_of_provision_then_cluster_down_leaves_nothing(home: Home) -> None:
    before = host_state()
    home.ok("platform.up")
    home.ok("cluster.up", "--nodes", "1")
    _provision_killed_at(home, home.workspace(NAME), _service_made)
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
