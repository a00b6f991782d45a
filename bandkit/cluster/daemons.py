"""Each node's Docker daemon: its configuration, its start in the node's namespaces, the
wait until it answers, and its removal with everything it started.

The daemon is the host's own `dockerd` with a data root, exec root (so its own managed
containerd), pidfile, unix socket and cgroup parent of its own (`daemon_config`), started
by `node-start.sh` inside the node's network namespace and a mount and UTS namespace of
its own. It runs with `BANDKIT_TAG=<node tag>` and `DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1`
(a service's image is taken from the node's store, never looked up in a registry).

`members` finds every process that belongs to a node whatever killed its parent: the
tag (the daemon, containerd, the shims), the node's network namespace, and the node's
cgroup parent (its containers, which have namespaces of their own). `remove` kills them
all, waits until none is left, then removes the node's cgroups and its runtime state.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx

from bandkit import processes
from bandkit.cluster import network
from bandkit.cluster.errors import ClusterError
from bandkit.cluster.layout import NETNS_DIR, Layout, Node
from bandkit.fsio import write_atomic

START_TIMEOUT_S = 60.0
KILL_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 60.0  # dockerd waits up to 15 s per container it stops, in parallel
POLL_S = 0.1
CGROUP_ROOT = Path("/sys/fs/cgroup")
SCRIPT = Path(__file__).with_name("node-start.sh")
# A nameserver nobody listens on: a lookup fails at once (connection refused) instead of
# waiting out a timeout.
RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"


def daemon_config(layout: Layout, node: Node) -> dict[str, object]:
    return {
        "data-root": str(layout.data_root(node)),
        "exec-root": str(node.run / "exec"),
        "pidfile": str(node.run / "docker.pid"),
        "hosts": [node.docker_host],
        "cgroup-parent": f"/{node.cgroup_parent}",
        "storage-driver": "overlay2",
        "log-level": "warn",
        "max-concurrent-downloads": 1,
    }


def answers(node: Node, timeout_s: float = 2.0) -> bool:
    """True when the node's daemon answers `GET /_ping` on its socket."""
    if not node.socket.exists():
        return False
    try:
        with httpx.Client(
            transport=httpx.HTTPTransport(uds=str(node.socket)), timeout=timeout_s
        ) as c:
            return c.get("http://docker/_ping").text == "OK"
    except httpx.HTTPError:
        return False


def prepare(layout: Layout, node: Node) -> None:
    """The node's files: data root, private /etc/docker, resolv.conf, runtime dir."""
    for path in (layout.data_root(node), layout.etc(node), node.run):
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    config = json.dumps(daemon_config(layout, node), indent=2) + "\n"
    write_atomic(layout.daemon_json(node), config, mode=0o600)
    write_atomic(layout.resolv_conf(node), RESOLV_CONF, mode=0o644)


def start(layout: Layout, node: Node) -> int:
    """Start the node's daemon in the background (its log: the node's dockerd.log); its
    pid. `wait_ready` then waits until it answers."""
    argv = [
        "nsenter",
        f"--net={NETNS_DIR / node.netns}",
        "--",
        "unshare",
        "--mount",
        "--uts",
        "--propagation",
        "slave",
        "--",
        "sh",
        str(SCRIPT),
        node.name,
        str(layout.node_dir(node)),
        str(node.run),
    ]
    env = {
        **os.environ,
        processes.TAG_ENV: node.tag,
        "DOCKER_SERVICE_PREFER_OFFLINE_IMAGE": "1",
    }
    env.pop("DOCKER_HOST", None)
    with open(layout.log(node), "ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            env=env,
            start_new_session=True,
        )
    return proc.pid


def wait_ready(layout: Layout, node: Node, pid: int, timeout_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if answers(node):
            return
        if not processes.alive(pid):
            break
        time.sleep(POLL_S)
    tail = "\n".join(_tail(layout.log(node)))
    raise ClusterError(
        f"the Docker daemon of {node.name} did not answer within {timeout_s:.0f}s; "
        f"the end of {layout.log(node)}:\n{tail}\nthen run `uv run invoke cluster.down`"
    )


def _tail(path: Path, lines: int = 8) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return []


def _in_cgroup(pid: int, parent: str) -> bool:
    try:
        text = Path(f"/proc/{pid}/cgroup").read_text(encoding="utf-8")
    except OSError:
        return False
    wanted = f"/{parent}/"
    return any(
        line.split(":", 2)[-1].startswith(wanted) or line.split(":", 2)[-1] == f"/{parent}"
        for line in text.splitlines()
    )


def _in_netns(pid: int, inode: int | None) -> bool:
    if inode is None:
        return False
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == inode
    except OSError:
        return False


def members(node: Node) -> list[int]:
    """Every live process of the node: tagged, in its network namespace, or in its
    cgroups."""
    inode = network.netns_inode(node.netns)
    tag = processes.tag_entry(node.tag)
    return processes.scan(
        lambda p: (
            tag in p.environ or _in_netns(p.pid, inode) or _in_cgroup(p.pid, node.cgroup_parent)
        )
    )


def kill(node: Node, timeout_s: float = KILL_TIMEOUT_S) -> int:
    """SIGKILL every process of the node until none is left; how many were killed."""
    killed: set[int] = set()
    deadline = time.monotonic() + timeout_s
    while True:
        pids = [p for p in members(node) if p != os.getpid()]
        if not pids:
            return len(killed)
        if time.monotonic() > deadline:
            raise ClusterError(
                f"{len(pids)} process(es) of {node.name} outlived SIGKILL for "
                f"{timeout_s:.0f}s (pids {', '.join(map(str, pids[:10]))}); "
                "run `uv run invoke cluster.down` again"
            )
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(POLL_S)


def dockerd_pid(node: Node) -> int | None:
    """The node's `dockerd` (found by its tag, not by its pidfile), if it runs."""
    for pid in processes.tagged_pids(node.tag):
        argv = processes.cmdline(pid) or (b"",)
        if Path(os.fsdecode(argv[0])).name == "dockerd":
            return pid
    return None


def stop(node: Node, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop the node's daemon as `systemctl stop docker` does: SIGTERM, so it stops its
    containers first; then kill whatever of the node outlived it (or `timeout_s`)."""
    pid = dockerd_pid(node)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while processes.alive(pid) and time.monotonic() < deadline:
            time.sleep(POLL_S)
    kill(node)


def remove_cgroups(node: Node, root: Path = CGROUP_ROOT) -> None:
    """Remove the node's cgroup parent (and the cgroups under it) in every hierarchy,
    deepest first; a hierarchy without it is skipped. Its processes must be gone."""
    for hierarchy in sorted(root.iterdir()) if root.is_dir() else []:
        top = hierarchy / node.cgroup_parent
        if top.is_symlink() or not top.is_dir():
            continue
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda d: -d[0].count("/")):
            _remove_cgroup(Path(dirpath))


def _remove_cgroup(path: Path, timeout_s: float = KILL_TIMEOUT_S) -> None:
    """rmdir one cgroup. Busy: a task the /proc scan missed is still in it (one exiting,
    or frozen mid-start by runc, which SIGKILL does not reach): thaw it, kill what its
    `cgroup.procs` lists, and try again until `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            os.rmdir(path)
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise ClusterError(f"cannot remove cgroup {path}: {exc.strerror}") from None
        with contextlib.suppress(OSError):
            (path / "freezer.state").write_text("THAWED", encoding="ascii")
        try:
            listed = (path / "cgroup.procs").read_text(encoding="ascii").split()
        except OSError:
            listed = []
        for pid in listed:
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        time.sleep(POLL_S)


def remove(node: Node) -> None:
    """Kill everything the node runs, then remove its cgroups and its runtime state."""
    kill(node)
    remove_cgroups(node)
    if node.run.is_dir() and not node.run.is_symlink():
        shutil.rmtree(node.run)
