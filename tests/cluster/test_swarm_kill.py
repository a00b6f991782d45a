"""`kill -9` of `kit.provision --runtime swarm` at each point of its work (the agent
image being loaded into the node, the relay listening, the proxy service made, the agent
service made), each kill followed by another `kit.provision` of the same agent, then one
`cluster.down`: nothing of the cluster is left on this machine (no daemon, namespace,
cgroup or relay process; the host's Docker unchanged), no image archive is left behind,
and one `kit.unprovision` then removes the platform agent and the records, so the run is
clean.

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


def _services() -> list[str]:
    return on_node(1, "service", "ls", "--format", "{{.Name}}", check=False).split()


def _scratch(home: Home) -> list[Path]:
    return list((home.run_dir / "runtimes" / "swarm" / "scratch").glob("image-*.tar"))


def _image_loading(home: Home) -> bool:
    return _scratch(home) != []


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
    assert _scratch(home) == [], "the killed load's archive is swept by the next load"
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
