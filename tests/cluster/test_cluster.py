"""The local cluster for real: `cluster.up`, `status`, `down` with their daemons, the swarm
they form, and `kill -9` at any point leaving nothing after one `cluster.down`.

Marked `cluster` (run by `nox -s cluster_tests`, one at a time: the cluster's names are
machine-wide). Needs root and a host Docker daemon.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bandkit.cluster import daemons
from bandkit.cluster.layout import NETNS_DIR, nodes
from bandkit.cluster.swarm import SERVICE_OPTIONS
from bandkit.dockercli import docker_answers
from tests.support import images
from tests.support.cluster import host_state, leftovers, on_node
from tests.support.readme import clean_env, readme_block
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster
REPO = Path(__file__).resolve().parents[2]
SMALL_IMAGE = "local/uv:0.9.13"  # a local base: small, always there after image.bases


@pytest.fixture(autouse=True)
def _root_and_docker() -> None:
    if os.geteuid() != 0:
        pytest.fail("the cluster tests need root (`sudo uv run nox -s cluster_tests`)")
    if not docker_answers():
        pytest.fail("no Docker daemon answers: `uv run invoke ci.prepare --lane cluster_tests`")


def invoke(*args: str, run_dir: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "invoke", *args, "--run-dir", str(run_dir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    """A run directory whose cluster is gone when the test ends, whatever it did, with
    /run/netns as it was (the first `ip netns add` makes and mounts it)."""
    had_netns_dir = NETNS_DIR.exists()
    yield tmp_path
    invoke("cluster.down", run_dir=tmp_path)
    assert leftovers(tmp_path) == []
    assert NETNS_DIR.exists() == had_netns_dir, "/run/netns was left (or taken)"


def test_the_readme_cluster_walkthrough_in_a_fresh_clone(clone: Path, kit_image: str) -> None:
    """The README's block as written (the kit image built, as `invoke build` makes it): three
    ready nodes, the kit image on each, plain `docker` on the cluster, a service spread over
    the nodes that answers across an internal overlay, the host daemon untouched; a second
    `cluster.up` is a no-op; `cluster.down` leaves nothing."""
    images.ensure_local_tag(kit_image)
    block = readme_block("A local multi-node cluster")
    assert block[0] == "uv run invoke build"
    before = host_state()
    script = "set -e\n" + "\n".join(block[1:-1])  # built above; cluster.down checked below
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=clone,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        for name in ("node1", "node2", "node3"):
            assert f"{name}" in done.stdout
        assert done.stdout.count("Ready") == 3  # `docker node ls` on the cluster
        again = subprocess.run(
            ["uv", "run", "invoke", "cluster.up", "--nodes", "3"],
            cwd=clone,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert again.returncode == 0, again.stderr
        assert "already up" in again.stdout
        wanted = on_node(1, "image", "inspect", "--format", "{{.Id}}", "band-python-kit:local")
        for index in (2, 3):
            assert (
                on_node(index, "image", "inspect", "--format", "{{.Id}}", "band-python-kit:local")
                == wanted
            )
        _a_spread_service_answers_across_the_overlay()
        assert host_state() == before
    finally:
        down = subprocess.run(
            ["bash", "-c", block[-1]],
            cwd=clone,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    assert down.returncode == 0, down.stdout + down.stderr
    assert "nothing left" in down.stdout
    assert leftovers(clone / ".run") == []
    assert host_state() == before


def _a_spread_service_answers_across_the_overlay() -> None:
    on_node(1, "network", "create", "--driver", "overlay", "--internal", "probe-net")
    on_node(
        1,
        "service",
        "create",
        "--quiet",
        "--detach",
        "--name",
        "probe",
        "--replicas",
        "3",
        "--network",
        "probe-net",
        *SERVICE_OPTIONS,
        "--stop-signal",
        "SIGINT",
        "--entrypoint",
        "python3",
        "band-python-kit:local",
        "-m",
        "http.server",
        "8000",
    )

    def running_nodes() -> set[str]:
        out = on_node(
            1,
            "service",
            "ps",
            "probe",
            "--filter",
            "desired-state=running",
            "--format",
            "{{.Node}} {{.CurrentState}}",
        )
        return {line.split()[0] for line in out.splitlines() if " Running" in line}

    wait_for(
        lambda: running_nodes() == {"node1", "node2", "node3"},
        timeout=90,
        what="the probe service running on all three nodes",
    )
    local = on_node(1, "ps", "--quiet", "--filter", "label=com.docker.swarm.service.name=probe")
    probe = (
        "import socket, urllib.request\n"
        "peers = sorted({a[4][0] for a in socket.getaddrinfo('probe', 8000)})\n"
        "assert len(peers) == 3, peers\n"
        "for peer in peers:\n"
        "    assert urllib.request.urlopen(f'http://{peer}:8000/', timeout=5).status == 200\n"
        "print('ok', len(peers))\n"
    )
    # a node's name table learns the replicas on the other nodes some seconds after they
    # run (the overlay's gossip): asked too soon, the name has fewer addresses than three
    wait_for(
        lambda: (
            on_node(1, "exec", local.split()[0], "python3", "-c", probe, check=False).strip()
            == "ok 3"
        ),
        timeout=45,
        step=0.5,
        what="the three replicas answering by the service's name across the overlay",
    )


def _manifest_count(run_dir: Path) -> int:
    try:
        return len(json.loads((run_dir / "cluster" / "manifest.json").read_text())["resources"])
    except (OSError, ValueError):
        return 0


def _kill_up_when(run_dir: Path, ready: Callable[[Path, str], bool], *extra: str) -> None:
    """Start `cluster.up`, SIGKILL its whole process group once `ready` holds."""
    log = run_dir / "up.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "invoke",
                "cluster.up",
                "--nodes",
                "3",
                *extra,
                "--run-dir",
                str(run_dir),
            ],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: ready(run_dir, log.read_text()) or proc.poll() is not None,
            timeout=120,
            step=0.02,
            what="the kill point",
        )
        assert proc.poll() is None, f"cluster.up ended before the kill point:\n{log.read_text()}"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    log.unlink()


KILL_POINTS: dict[str, Callable[[Path, str], bool]] = {
    "first record": lambda d, _out: _manifest_count(d) >= 1,
    "hub made": lambda d, _out: _manifest_count(d) >= 3,
    "first node": lambda d, _out: _manifest_count(d) >= 7,
    "daemons starting": lambda _d, out: "starting 3 Docker daemon" in out,
    "swarm forming": lambda _d, out: "forming the swarm" in out,
    "image loading": lambda _d, out: "loading" in out,
}


def test_kill_9_of_up_at_any_point_then_one_down_leaves_nothing(run_dir: Path) -> None:
    before = host_state()
    for point, ready in KILL_POINTS.items():
        _kill_up_when(run_dir, ready, "--image", SMALL_IMAGE)
        assert leftovers(run_dir) != [], f"{point}: nothing was left to remove"
        down = invoke("cluster.down", run_dir=run_dir)
        assert down.returncode == 0, f"{point}: {down.stdout}{down.stderr}"
        assert leftovers(run_dir) == [], point
    # and `cluster.up` after a killed one rebuilds the cluster whole by itself
    _kill_up_when(run_dir, KILL_POINTS["swarm forming"])
    up = invoke("cluster.up", "--nodes", "3", "--no-image", run_dir=run_dir)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "not whole" in up.stdout
    assert invoke("cluster.status", run_dir=run_dir).returncode == 0
    # and kill -9 of `cluster.down` itself, partway
    full = _manifest_count(run_dir)
    with open(run_dir / "down.log", "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "invoke", "cluster.down", "--run-dir", str(run_dir)],
            cwd=REPO,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wait_for(
        lambda: 0 < _manifest_count(run_dir) < full or proc.poll() is not None,
        timeout=60,
        step=0.01,
        what="cluster.down partway",
    )
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    (run_dir / "down.log").unlink()
    down = invoke("cluster.down", run_dir=run_dir)
    assert down.returncode == 0, down.stdout + down.stderr
    assert leftovers(run_dir) == []
    assert host_state() == before


def test_a_dead_node_daemon_shows_and_up_makes_the_cluster_whole(
    run_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # on disk, as on a machine with little memory (the other tests run the default, a tmpfs)
    up = invoke("cluster.up", "--nodes", "3", "--no-image", "--disk", run_dir=run_dir)
    assert up.returncode == 0, up.stdout + up.stderr
    assert "the nodes' Docker data on disk (--disk)" in up.stdout, up.stdout
    assert not [line for line in leftovers(run_dir) if line.startswith("mount ")]
    other = tmp_path_factory.mktemp("other")
    refused = invoke("cluster.up", "--no-image", run_dir=other)
    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    assert f"cluster.down --run-dir {run_dir}" in refused.stderr
    assert not (other / "cluster").exists()

    node2 = nodes(2)[1]
    ids = on_node(1, "node", "ls", "--quiet").split()
    dockerd = daemons.dockerd_pid(node2)
    assert dockerd is not None, "node2's daemon not found by its tag"
    os.kill(dockerd, signal.SIGKILL)
    wait_for(lambda: not daemons.answers(node2), timeout=30, what="node2's daemon gone")
    state = invoke("cluster.status", "--json", run_dir=run_dir)
    assert state.returncode == 1
    listed = {n["name"]: n for n in json.loads(state.stdout)["nodes"]}
    assert listed["node2"]["daemon"] is False
    assert listed["node1"]["daemon"] is True

    again = invoke("cluster.up", "--nodes", "3", "--no-image", run_dir=run_dir)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "node2's Docker daemon is down: starting it again" in again.stdout, again.stdout
    assert "whole again" in again.stdout, again.stdout
    assert on_node(1, "node", "ls", "--quiet").split() == ids, "healed in place, not rebuilt"
    assert invoke("cluster.status", run_dir=run_dir).returncode == 0
