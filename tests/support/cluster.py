"""What the cluster lane's tests share: the host daemon's state (the cluster must not
change it), what a local cluster left on this machine, and `docker` on one of its nodes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from bandkit import processes
from bandkit.cluster import daemons
from bandkit.cluster.layout import RUN_ROOT, nodes


def host_state() -> list[str]:
    """The host daemon's containers and networks: the cluster must not change them. (A
    container already being removed, say by an earlier lane, goes away by itself.)"""
    out = []
    for argv in (["ps", "-a", "--format", "{{.ID}} {{.Status}}"], ["network", "ls", "-q"]):
        done = subprocess.run(
            ["docker", *argv], capture_output=True, text=True, check=True, timeout=60
        )
        lines = [line for line in done.stdout.splitlines() if "Removal In Progress" not in line]
        out += sorted(lines)
    return out


def leftovers(run_dir: Path) -> list[str]:
    """Everything of a local cluster still on this machine."""
    found = []
    listed = subprocess.run(
        ["ip", "netns", "list"], capture_output=True, text=True, check=True, timeout=30
    )
    found += [f"netns {line.split()[0]}" for line in listed.stdout.splitlines() if "bkc-" in line]
    found += [f"dir {RUN_ROOT}"] if RUN_ROOT.exists() else []
    found += [  # the nodes' tmpfs (bandkit.cluster.memory), by its source name
        f"mount {line.split(' ')[4]}"
        for line in Path("/proc/self/mountinfo").read_text().splitlines()
        if " - tmpfs bandkit-cluster " in line
    ]
    found += [f"dir {run_dir / 'cluster'}"] if (run_dir / "cluster").exists() else []
    found += [
        f"cgroup {path}"
        for path in Path(daemons.CGROUP_ROOT).glob("*/bandkit-cluster-*")
        if path.is_dir()
    ]
    found += [f"pid {pid}" for pid in processes.tagged_pids("bandkit-cluster/", prefix=True)]
    for node in nodes(9):
        found += [f"{node.name} pid {pid}" for pid in daemons.members(node)]
    return found


def on_node(index: int, *args: str, check: bool = True) -> str:
    """`docker ARGS` on node `index`'s daemon (node 1: the manager); its stdout."""
    done = subprocess.run(
        ["docker", *args],
        env={**os.environ, "DOCKER_HOST": nodes(index)[-1].docker_host},
        capture_output=True,
        text=True,
        check=check,
        timeout=120,
    )
    return done.stdout
