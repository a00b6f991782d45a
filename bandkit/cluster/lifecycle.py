"""`up`, `status` and `down` of the local cluster, every piece recorded before it is made.

The manifest (`<run_dir>/cluster/manifest.json`, kind `cluster`, each entry's `part` one
of `owner`, `netns-dir`, `netns`, `memory`, `veth`, `files`, `daemon`) is written before
the piece it names exists, so `down` removes exactly what `up` made, in reverse order,
whatever point a crash or a `kill -9` stopped it at; each removal treats "already gone"
as done. A `cluster.up` that finds a node's daemon dead starts it again in place (on its
data root, so the node keeps its swarm identity and the rest of the cluster keeps
running); one that finds the record of an `up` that did not finish, a node it cannot
start again, or the nodes' tmpfs gone (`memory`: the machine restarted), removes what is
recorded first, then builds the cluster again: either command recovers from a crash.
`restart` stops one node's daemon as a reboot would and starts it again.

Nothing here touches the host's own Docker daemon but `docker save` (`images`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bandkit.cluster import daemons, images, memory, network, swarm
from bandkit.cluster.errors import ClusterError
from bandkit.cluster.layout import (
    HUB_NETNS,
    MAX_NODES,
    NETNS_DIR,
    OWNER_FILE,
    RUN_ROOT,
    Layout,
    Node,
    nodes,
)
from bandkit.fsio import remove_stale_temps, write_atomic
from bandkit.manifest import Kind, Manifest, Resource, TeardownReport, teardown

Progress = Callable[[str], None]
COMPLETE = "complete"  # the `owner` entry's `state` once up() has finished


def require_root() -> None:
    if os.geteuid() != 0:
        raise ClusterError(
            "the local cluster needs root (network namespaces and Docker daemons of its "
            "own): run it as root, e.g. `sudo uv run invoke cluster.up`"
        )


@dataclass(frozen=True)
class Cluster:
    """What `up` made: its nodes, managers first."""

    layout: Layout
    nodes: tuple[Node, ...]
    managers: int

    @property
    def manager(self) -> Node:
        return self.nodes[0]

    def role(self, node: Node) -> str:
        return "manager" if node.index <= self.managers else "worker"


def _recorded(manifest: Manifest) -> Cluster | None:
    owner = manifest.find(Kind.CLUSTER, "owner")
    if owner is None:
        return None
    count = int(owner.details.get("nodes", "0"))
    return Cluster(
        Layout(manifest.path.parent), nodes(count), int(owner.details.get("managers", "1"))
    )


def _foreign_owner(layout: Layout) -> str | None:
    """The home of another cluster holding the machine-wide names, if one does."""
    if not network.netns_exists(HUB_NETNS):
        return None
    try:
        home = OWNER_FILE.read_text(encoding="utf-8").strip()
    except OSError:
        home = "an unknown run directory"
    return None if home == str(layout.home) else home


def up(
    layout: Layout,
    *,
    count: int = 3,
    managers: int = 1,
    image_refs: Sequence[str] = (),
    on_disk: bool = False,
    progress: Progress = print,
) -> Cluster:
    """Make (or find) a cluster of `count` nodes, `managers` of them managers, with
    `image_refs` loaded into every node, and their files in memory unless `on_disk` (or
    the machine has too little: `memory.plan`); idempotent."""
    require_root()
    if not 1 <= count <= MAX_NODES:
        raise ClusterError(f"--nodes must be 1 to {MAX_NODES} (got {count})")
    if managers not in (1, 3) or managers > count:
        raise ClusterError(
            f"--managers must be 1 or 3 and at most --nodes (got {managers}): two managers "
            "cannot lose one without losing the swarm's quorum"
        )
    foreign = _foreign_owner(layout)
    if foreign is not None:
        raise ClusterError(
            f"a local cluster of another run directory holds this machine's cluster names "
            f"({foreign}); run `uv run invoke cluster.down --run-dir {foreign}` first"
        )
    began = time.monotonic()
    with Manifest.open(layout.manifest, run_id="cluster") as manifest:
        existing = _recorded(manifest)
        if existing is not None:
            owner = manifest.find(Kind.CLUSTER, "owner")
            assert owner is not None
            # a restarted machine took the nodes' tmpfs with it: build it all again
            complete = owner.details.get("state") == COMPLETE and not _memory_lost(manifest, layout)
            same = len(existing.nodes) == count and existing.managers == managers
            states = node_states(existing)
            ready = all(n.ready for n in states)
            if complete and not same and ready:
                raise ClusterError(
                    f"the cluster is up with {len(existing.nodes)} nodes "
                    f"({existing.managers} manager(s)); run `uv run invoke cluster.down` "
                    "first to change that"
                )
            if complete and same and (ready or _heal(existing, states, progress)):
                _load(existing, image_refs, progress)
                progress("cluster.up: already up" if ready else "cluster.up: whole again")
                return existing
            progress(
                "cluster.up: the cluster is not whole (an earlier run stopped, a node "
                "could not be started again, or the machine restarted): removing what is "
                "recorded first"
            )
            report = _teardown(manifest)
            if not report.clean:
                raise ClusterError(_failed(report))
        cluster = Cluster(layout, nodes(count), managers)
        _build(manifest, cluster, memory.plan(on_disk=on_disk), progress)
        _load(cluster, image_refs, progress)
        owner = manifest.find(Kind.CLUSTER, "owner")
        assert owner is not None
        manifest.update(owner, state=COMPLETE)
    progress(f"cluster.up: {count} node(s) up in {time.monotonic() - began:.1f}s")
    return cluster


def _build(manifest: Manifest, cluster: Cluster, where: memory.Plan, progress: Progress) -> None:
    layout = cluster.layout
    record = manifest.record
    record(
        Kind.CLUSTER,
        "owner",
        part="owner",
        nodes=str(len(cluster.nodes)),
        managers=str(cluster.managers),
        state="building",
    )
    RUN_ROOT.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomic(OWNER_FILE, str(layout.home) + "\n", mode=0o600)
    if not NETNS_DIR.exists():  # the first `ip netns add` mounts it: ours to release
        record(Kind.CLUSTER, "netns-dir", part="netns-dir")
    record(Kind.CLUSTER, f"netns/{HUB_NETNS}", part="netns", name=HUB_NETNS)
    network.add_hub()
    if where.in_memory:
        record(Kind.CLUSTER, "memory", part="memory", size=str(where.size))
        memory.mount(layout.nodes_dir, where.size)
    progress(where.line)
    progress(f"cluster.up: starting {len(cluster.nodes)} Docker daemon(s) ...")
    started: list[tuple[Node, int]] = []
    for node in cluster.nodes:
        record(Kind.CLUSTER, f"netns/{node.netns}", part="netns", name=node.netns)
        network.add_netns(node.netns)
        record(Kind.CLUSTER, f"veth/{node.veth}", part="veth", name=node.veth)
        network.join(node)
        record(
            Kind.CLUSTER,
            f"files/{node.name}",
            part="files",
            node=str(node.index),
            path=str(layout.node_dir(node)),
        )
        daemons.prepare(layout, node)
        record(Kind.CLUSTER, f"daemon/{node.name}", part="daemon", node=str(node.index))
        started.append((node, daemons.start(layout, node)))
    for node, pid in started:
        daemons.wait_ready(layout, node, pid)
    progress("cluster.up: forming the swarm ...")
    swarm.init(cluster.manager)
    for node in cluster.nodes[1:]:
        swarm.join(cluster.manager, node, cluster.role(node))
    swarm.rotate_tokens(cluster.manager)
    swarm.wait_ready(cluster.manager, [n.name for n in cluster.nodes])


def _memory_lost(manifest: Manifest, layout: Layout) -> bool:
    """The nodes' files were recorded in memory and that tmpfs is gone (a reboot)."""
    return manifest.find(Kind.CLUSTER, "memory") is not None and not network.mounted(
        layout.nodes_dir
    )


def _heal(cluster: Cluster, states: Sequence[NodeState], progress: Progress) -> bool:
    """Start again, in place, each node whose daemon died, and wait until the swarm has
    every node ready: what the cluster runs elsewhere keeps running. False if that did
    not make it whole (then `up` rebuilds it)."""
    try:
        for node, state in zip(cluster.nodes, states, strict=True):
            if not state.daemon:
                progress(f"cluster.up: {node.name}'s Docker daemon is down: starting it again")
                _revive(cluster.layout, node)
        swarm.wait_ready(cluster.manager, [n.name for n in cluster.nodes])
    except ClusterError as exc:
        progress(f"cluster.up: could not make the cluster whole in place: {exc}")
        return False
    return True


def _revive(layout: Layout, node: Node) -> None:
    """A node's daemon started again on its data root (so the node keeps its place in
    the swarm), after whatever was left of the old one is gone."""
    daemons.remove(node)
    daemons.prepare(layout, node)
    daemons.wait_ready(layout, node, daemons.start(layout, node))


def restart(layout: Layout, name: str, progress: Progress = print) -> float:
    """Restart one node's Docker daemon as a reboot of that machine would: its containers
    stop, the daemon starts again on its data root and rejoins the swarm, which restarts
    or reschedules the tasks. The seconds until the swarm had it ready again."""
    require_root()
    state = status(layout)
    if state.cluster is None or not state.complete:
        raise ClusterError("no local cluster is up: run `uv run invoke cluster.up` first")
    by_name = {n.name: n for n in state.cluster.nodes}
    if name not in by_name:
        raise ClusterError(f"no node {name!r}: the cluster's nodes are {', '.join(by_name)}")
    node = by_name[name]
    began = time.monotonic()
    progress(f"cluster.restart: stopping {name}'s Docker daemon (it stops its containers) ...")
    daemons.stop(node)
    progress(f"cluster.restart: starting {name}'s Docker daemon again ...")
    _revive(layout, node)
    swarm.wait_ready(state.cluster.manager, [name])
    return time.monotonic() - began


def _load(cluster: Cluster, image_refs: Sequence[str], progress: Progress) -> None:
    if image_refs:
        images.distribute(image_refs, cluster.nodes, progress)


@dataclass(frozen=True)
class NodeState:
    name: str
    address: str
    daemon: bool  # its Docker daemon answers
    row: swarm.NodeRow | None  # what the swarm says of it (None: unknown to it, or no manager)

    @property
    def ready(self) -> bool:
        """Its daemon answers and the swarm has it ready."""
        return self.daemon and self.row is not None and self.row.state == "ready"

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "address": self.address, "daemon": self.daemon}
        if self.row is not None:
            out.update({k: v for k, v in self.row.as_json().items() if k != "name"})
        return out


@dataclass(frozen=True)
class Status:
    cluster: Cluster | None
    complete: bool
    states: tuple[NodeState, ...]

    @property
    def whole(self) -> bool:
        """`up` finished and every node is ready."""
        return self.complete and bool(self.states) and all(s.ready for s in self.states)

    @property
    def docker_host(self) -> str | None:
        return self.cluster.manager.docker_host if self.cluster else None

    def as_json(self) -> dict[str, object]:
        return {
            "up": self.complete,
            "docker_host": self.docker_host,
            "nodes": [s.as_json() for s in self.states],
        }


def status(layout: Layout) -> Status:
    """What the manifest records and what each node says now; changes nothing."""
    if not layout.manifest.exists():
        return Status(None, False, ())
    with Manifest.open(layout.manifest, run_id="cluster") as manifest:
        cluster = _recorded(manifest)
        owner = manifest.find(Kind.CLUSTER, "owner")
        complete = owner is not None and owner.details.get("state") == COMPLETE
        complete = complete and not _memory_lost(manifest, layout)
    if cluster is None:
        return Status(None, False, ())
    return Status(cluster, complete, node_states(cluster))


def node_states(cluster: Cluster) -> tuple[NodeState, ...]:
    """Each node as its daemon and the swarm's manager say now."""
    rows: dict[str, swarm.NodeRow] = {}
    if daemons.answers(cluster.manager):
        try:
            rows = {r.hostname: r for r in swarm.node_rows(cluster.manager)}
        except ClusterError:
            rows = {}
    return tuple(
        NodeState(n.name, n.address, daemons.answers(n), rows.get(n.name)) for n in cluster.nodes
    )


def down(layout: Layout, progress: Progress = print) -> TeardownReport:
    """Remove everything the manifest records, newest first; idempotent."""
    if not layout.manifest.exists():
        return TeardownReport()
    require_root()
    with Manifest.open(layout.manifest, run_id="cluster") as manifest:
        progress(f"cluster.down: removing {len(manifest.resources)} recorded piece(s) ...")
        return _teardown(manifest)


def _teardown(manifest: Manifest) -> TeardownReport:
    layout = Layout(manifest.path.parent)
    return teardown(manifest, {Kind.CLUSTER: lambda r: _remove(layout, r)})


def _remove(layout: Layout, resource: Resource) -> None:
    details = resource.details
    part = details.get("part")
    if part == "daemon":
        daemons.remove(Node(int(details["node"])))
    elif part == "files":
        node = Node(int(details["node"]))
        path = layout.node_dir(node)
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)
        # its runtime dir too: `prepare` makes it before the daemon's own entry exists
        if node.run.is_dir() and not node.run.is_symlink():
            shutil.rmtree(node.run)
    elif part == "memory":
        memory.unmount(layout.nodes_dir)
    elif part == "veth":
        network.remove_veth(details["name"])
    elif part == "netns":
        network.delete_netns(details["name"])
    elif part == "netns-dir":
        network.release_netns_dir()
    elif part == "owner":
        try:
            if OWNER_FILE.read_text(encoding="utf-8").strip() == str(layout.home):
                OWNER_FILE.unlink()
        except FileNotFoundError:
            pass
        remove_stale_temps(OWNER_FILE)
        shutil.rmtree(layout.home / "scratch", ignore_errors=True)
        for empty in (RUN_ROOT, layout.nodes_dir):
            with contextlib.suppress(OSError):
                empty.rmdir()
    else:
        raise ClusterError(f"unknown cluster part {part!r} in {layout.manifest}")


def _failed(report: TeardownReport) -> str:
    lines = "\n".join(report.lines())
    return (
        f"could not remove all of the earlier cluster:\n{lines}\nrun `uv run invoke cluster.down`"
    )


def describe(state: Status) -> list[str]:
    """`cluster.status`'s lines: one per node, then how to reach the swarm."""
    if state.cluster is None:
        return ["cluster.status: no local cluster (`uv run invoke cluster.up --nodes 3`)"]
    lines = [f"{'NODE':<7} {'ADDRESS':<11} {'DAEMON':<7} {'ROLE':<17} {'AVAILABILITY':<13} STATE"]
    for s in state.states:
        row = s.row
        lines.append(
            f"{s.name:<7} {s.address:<11} {'up' if s.daemon else 'down':<7} "
            f"{row.role if row else '?':<17} {row.availability if row else '?':<13} "
            f"{row.state if row else 'unknown'}"
        )
    if not state.complete:
        lines.append(
            "cluster.status: the cluster is not whole (a cluster.up did not finish, or the "
            "machine restarted): "
            "`uv run invoke cluster.up` builds it again, `cluster.down` removes it"
        )
    lines.append(f"export DOCKER_HOST={state.docker_host}")
    return lines


def to_json(state: Status) -> str:
    return json.dumps(state.as_json(), indent=2)
