"""The local cluster's pure parts: its names and files, its refusals, its status lines,
its cgroup removal (no root, no daemon: the fast lane)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandkit.cluster import (
    ClusterError,
    Layout,
    daemons,
    describe,
    lifecycle,
    memory,
    network,
    status,
    up,
)
from bandkit.cluster.layout import MAX_NODES, nodes
from tests import commands

REPO = Path(__file__).resolve().parents[2]


def test_every_name_fits_the_kernel_and_every_node_is_its_own() -> None:
    every = nodes(MAX_NODES)
    for node in every:
        assert len(node.veth) <= 15
        assert len(node.netns) <= 15
        assert len(str(node.socket)) < 108  # a unix socket path's limit
    layout = Layout.of(Path("relative/run"))
    assert layout.home.is_absolute()
    configs = [daemons.daemon_config(layout, n) for n in every]
    for key in ("data-root", "exec-root", "pidfile", "hosts", "cgroup-parent"):
        values = [str(c[key]) for c in configs]
        assert len(set(values)) == len(values), key
    assert len({n.address for n in every}) == len(every)


def test_up_needs_root_and_says_so(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match=r"needs root.*sudo uv run invoke cluster.up"):
        up(Layout.of(tmp_path), count=3)
    assert not (tmp_path / "cluster").exists()


@pytest.mark.parametrize(
    ("count", "managers", "says"),
    [(0, 1, "--nodes must be 1 to 9"), (10, 1, "--nodes"), (3, 2, "quorum"), (2, 3, "--managers")],
)
def test_up_refuses_a_shape_it_cannot_make(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, count: int, managers: int, says: str
) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(ClusterError, match=says):
        up(Layout.of(tmp_path), count=count, managers=managers)
    assert not (tmp_path / "cluster").exists()  # refused before anything is recorded


def test_status_without_a_cluster_says_how_to_start_one(tmp_path: Path) -> None:
    state = status(Layout.of(tmp_path))
    assert state.cluster is None
    assert state.docker_host is None
    assert describe(state) == [
        "cluster.status: no local cluster (`uv run invoke cluster.up --nodes 3`)"
    ]


def test_the_tasks_answer_without_a_cluster(tmp_path: Path) -> None:
    for verb, says in (("status", "no local cluster"), ("down", "no local cluster")):
        done = subprocess.run(
            [sys.executable, "-m", "invoke", f"cluster.{verb}", "--run-dir", str(tmp_path)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert says in done.stdout


def test_restart_without_a_cluster_says_how_to_start_one(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("restart checks for root first")
    argv = [sys.executable, "-m", "invoke", "cluster.restart", "--node", "node2"]
    done = commands.run([*argv, "--run-dir", str(tmp_path)], timeout=20)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "no local cluster is up: run `uv run invoke cluster.up` first" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cluster").exists()


def test_cgroups_are_removed_deepest_first_and_links_are_not_followed(tmp_path: Path) -> None:
    node = nodes(1)[0]
    (tmp_path / "cpu" / node.cgroup_parent / "abc" / "def").mkdir(parents=True)
    (tmp_path / "memory" / node.cgroup_parent).mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "pids").mkdir()
    (tmp_path / "pids" / node.cgroup_parent).symlink_to(elsewhere)
    daemons.remove_cgroups(node, root=tmp_path)
    assert not (tmp_path / "cpu" / node.cgroup_parent).exists()
    assert not (tmp_path / "memory" / node.cgroup_parent).exists()
    assert elsewhere.is_dir()  # a link is not ours to follow


def test_an_unknown_recorded_part_is_a_failure_not_a_silent_drop(tmp_path: Path) -> None:
    from bandkit.manifest import Kind, Manifest

    layout = Layout.of(tmp_path)
    with Manifest.open(layout.manifest, run_id="cluster") as manifest:
        manifest.record(Kind.CLUSTER, "mystery", part="mystery")
        report = lifecycle._teardown(manifest)
    assert not report.clean
    assert "unknown cluster part 'mystery'" in report.lines()[0]
    assert layout.manifest.exists()  # kept for a later run


def test_a_directory_bound_onto_itself_counts_as_mounted(tmp_path: Path) -> None:
    """What `ip netns add` does to /run/netns: `os.path.ismount` says no (same device as its
    parent), so its release skipped the unmount and the rmdir failed busy."""
    table = tmp_path / "mountinfo"
    table.write_text(
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "47 27 254:0 /run/netns /run/netns rw,relatime shared:2 - ext4 /dev/vda rw\n"
        "48 27 254:0 /a /run/with\\040space rw - ext4 /dev/vda rw\n",
        encoding="utf-8",
    )
    assert network.mounted(Path("/run/netns"), table)
    assert network.mounted(Path("/run/with space"), table)
    assert not network.mounted(Path("/run"), table)
    assert not network.mounted(Path("/run/netns/x"), table)


MEMINFO = "MemTotal:       {total} kB\nMemFree:         1000 kB\nMemAvailable:   {available} kB\n"


@pytest.mark.parametrize(
    ("total_gib", "available_gib", "size_gib"),
    [(24, 21, 12), (8, 4, 4), (8, 3.9, 0), (2, 1, 0)],
)
def test_the_nodes_go_in_memory_only_when_the_machine_has_it_to_spare(
    tmp_path: Path, total_gib: float, available_gib: float, size_gib: int
) -> None:
    table = tmp_path / "meminfo"
    kib = 1 << 20
    table.write_text(
        MEMINFO.format(total=int(total_gib * kib), available=int(available_gib * kib)),
        encoding="utf-8",
    )
    where = memory.plan(table)
    assert where.size == size_gib << 30
    assert where.in_memory == (size_gib > 0)
    assert ("in memory (tmpfs" in where.line) == where.in_memory
    assert ("on disk" in where.line) != where.in_memory


def test_without_a_memory_table_or_when_asked_the_nodes_stay_on_disk(tmp_path: Path) -> None:
    assert not memory.plan(tmp_path / "missing").in_memory
    table = tmp_path / "meminfo"
    table.write_text(MEMINFO.format(total=24 << 20, available=21 << 20), encoding="utf-8")
    assert memory.plan(table).in_memory
    asked = memory.plan(table, on_disk=True)
    assert not asked.in_memory
    assert "on disk (--disk)" in asked.line


def test_a_tmpfs_is_never_mounted_through_a_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "nodes").symlink_to(elsewhere)
    with pytest.raises(ClusterError, match="is a symbolic link"):
        memory.mount(tmp_path / "nodes", 1 << 30)


def test_a_cluster_whose_tmpfs_is_gone_is_not_whole(tmp_path: Path) -> None:
    """After a reboot the manifest still says `complete`, but the nodes' files went with
    the tmpfs: `status` must not call that cluster up (`cluster.up` builds it again, and
    `cluster.restart` refuses), as it does while the tmpfs is mounted."""
    from bandkit.manifest import Kind, Manifest

    layout = Layout.of(tmp_path)
    with Manifest.open(layout.manifest, run_id="cluster") as manifest:
        manifest.record(Kind.CLUSTER, "owner", part="owner", nodes="1", state="complete")
    assert status(layout).complete
    with Manifest.open(layout.manifest, run_id="cluster") as manifest:
        manifest.record(Kind.CLUSTER, "memory", part="memory", size=str(1 << 30))
    state = status(layout)
    assert not state.complete
    assert "or the machine restarted" in "\n".join(describe(state))
