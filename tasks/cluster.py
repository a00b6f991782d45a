"""`cluster.*`: a local multi-node Docker Swarm on this machine (bandkit/cluster/)."""

from __future__ import annotations

from invoke.context import Context
from invoke.tasks import task

from bandkit.errors import BandkitError
from bandkit.terminal import printable
from tasks._common import RUN_DIR_HELP, need, reports, resolve_run_dir

KIT_IMAGE = "band-python-kit:local"


@task(
    name="up",
    iterable=["image"],
    help={
        "nodes": "how many nodes (1-9; default 3)",
        "managers": "how many of them are managers: 1 or 3 (default 1)",
        "image": f"an image of the host's Docker to load into every node (repeatable; "
        f"default {KIT_IMAGE}, the kit image)",
        "no_image": "load no image",
        "disk": "keep the nodes' files on disk (default: in memory, a tmpfs, when the "
        "machine has 4 GiB available)",
        "run_dir": RUN_DIR_HELP,
    },
)
@reports("cluster.up")
def cluster_up(
    c: Context,
    nodes: int = 3,
    managers: int = 1,
    image: list[str] | None = None,
    no_image: bool = False,
    disk: bool = False,
    run_dir: str = "",
) -> None:
    """Start a local Docker Swarm of --nodes nodes, each a Docker daemon in a network
    namespace of its own, with the kit image loaded into each.

    Needs root. Everything it makes is recorded first (<run_dir>/cluster/manifest.json),
    so `cluster.down` removes exactly that, even after a crash; run again, it reports the
    cluster already up, starts again a node whose daemon died (what runs elsewhere keeps
    running), or rebuilds one an earlier run left unfinished.
    """
    from bandkit import cluster

    refs = [] if no_image else [r for r in (image or [KIT_IMAGE]) if r]
    made = cluster.up(
        cluster.Layout.of(resolve_run_dir(c, run_dir)),
        count=nodes,
        managers=managers,
        image_refs=refs,
        on_disk=disk,
    )
    print(f"export DOCKER_HOST={made.manager.docker_host}")


@task(
    name="status",
    help={"json": "print JSON instead of the table", "run_dir": RUN_DIR_HELP},
)
@reports("cluster.status")
def cluster_status(c: Context, json: bool = False, run_dir: str = "") -> None:
    """Each node (name, address, daemon, role, availability, state) and the DOCKER_HOST
    that reaches a manager. Exits 1 when the cluster is not whole; changes nothing."""
    from bandkit import cluster

    state = cluster.status(cluster.Layout.of(resolve_run_dir(c, run_dir)))
    print(cluster.to_json(state) if json else "\n".join(cluster.describe(state)))
    if state.cluster is not None and not state.whole:
        raise BandkitError(
            "not every node is up and ready; `uv run invoke cluster.up` starts a dead "
            "node's daemon again (what runs on the others keeps running)"
        )


@task(
    name="restart",
    help={"node": "the node whose daemon to restart (node1, node2, ...)", "run_dir": RUN_DIR_HELP},
)
@reports("cluster.restart")
def cluster_restart(c: Context, node: str = "", run_dir: str = "") -> None:
    """Restart one node's Docker daemon, as a reboot of that machine would: its containers
    stop, the daemon starts again on its own data and rejoins the swarm, and the swarm
    restarts or moves what ran there. A drill for what agents on the cluster survive.

    Needs root. A node whose daemon died is started again by `cluster.up`.
    """
    from bandkit import cluster

    node = need(node, "--node", "node2")
    took = cluster.restart(cluster.Layout.of(resolve_run_dir(c, run_dir)), node)
    print(f"cluster.restart: {node} ready again in {took:.1f}s")


@task(name="down", help={"run_dir": RUN_DIR_HELP})
@reports("cluster.down")
def cluster_down(c: Context, run_dir: str = "") -> None:
    """Remove the local cluster: daemons and all they run, namespaces, veths, the bridge,
    cgroups and data, exactly as recorded. Idempotent; run it again after a failure."""
    from bandkit import cluster

    report = cluster.down(cluster.Layout.of(resolve_run_dir(c, run_dir)))
    for line in report.lines():
        print(f"cluster.down: {line}")
    if not report.clean:
        raise BandkitError("some pieces could not be removed (above); run cluster.down again")
    print("cluster.down: nothing left" if report.removed else "cluster.down: no local cluster")


@task(
    name="drain",
    help={
        "node": "the node to drain (its hostname: node1, node2, ...)",
        "undo": "let the node take tasks again instead",
    },
)
@reports("cluster.drain")
def cluster_drain(c: Context, node: str = "", undo: bool = False) -> None:
    """Drain a node of the swarm the swarm runtime runs on (BANDKIT_SWARM_HOST, else the
    local cluster) for maintenance: the kit's sandboxes are moved off it first, in an order
    that spares them Docker Engine's 30 s overlay join stall, then the node is drained
    (`docker node update --availability drain`). --undo makes it active again. Re-run
    either after an interruption: a killed drain's constraints are taken away first."""
    import os

    from bandkit.runtimes.docker.engine import Engine
    from bandkit.runtimes.select import SWARM_HOST_ENV
    from bandkit.runtimes.swarm import drain
    from bandkit.runtimes.swarm.runtime import manager_host

    node = need(node, "--node", "node2")
    engine = Engine("docker", manager_host(os.environ.get(SWARM_HOST_ENV) or None))

    def say(line: str) -> None:
        print(printable(f"cluster.drain: {line}"), flush=True)

    if undo:
        drain.activate(engine, node, out=say)
        say(f"{node} is active: it takes new tasks (the swarm moves none back)")
        return
    say(drain.drain(engine, node, out=say).line())
