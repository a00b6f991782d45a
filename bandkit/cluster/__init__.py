"""A local multi-node Docker Swarm on one machine: `cluster.up`, `cluster.status`,
`cluster.down`.

Each node is the host's own `dockerd` in a network namespace of its own, joined to the
others through a bridge in a hub namespace (addresses only inside our namespaces:
nothing reaches the host or beyond), with its own data root, exec root, socket, cgroup
parent and /etc/docker. Node 1 is the first manager; the swarm's `DOCKER_HOST` is its
socket, so the plain `docker node ls` and `docker service ps` work on the cluster. A
real cluster is used the same way: whatever manager `DOCKER_HOST` names.

The modules, one concern each:

- `layout`: the names, addresses and paths (pure).
- `network`: the hub, the bridge, the node namespaces and their veths (`ip`).
- `daemons`: each node's daemon: configuration, start, readiness, and its removal with
  every process and cgroup it left.
- `swarm`: init, join, the join tokens, what the swarm says of its nodes.
- `memory`: the nodes' files on a tmpfs when the machine has the memory to spare.
- `images`: images from the host's daemon into every node.
- `lifecycle`: `up`, `status`, `restart`, `down` over the manifest that records every piece first.
"""

from bandkit.cluster.errors import ClusterError
from bandkit.cluster.layout import Layout, Node
from bandkit.cluster.lifecycle import (
    Cluster,
    Status,
    describe,
    down,
    restart,
    status,
    to_json,
    up,
)

__all__ = [
    "Cluster",
    "ClusterError",
    "Layout",
    "Node",
    "Status",
    "describe",
    "down",
    "restart",
    "status",
    "to_json",
    "up",
]
