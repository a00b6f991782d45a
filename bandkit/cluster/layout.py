"""Where a local cluster lives: its names, addresses and files (pure, no side effects).

One local cluster per machine: the namespaces, the bridge, the addresses and
`/run/bandkit-cluster` are machine-wide names. The cluster's home (its manifest, each
node's data root, private /etc/docker, resolv.conf and log) is `<run_dir>/cluster`; each
node's runtime state (exec root, socket, pidfile) is `/run/bandkit-cluster/<node>`, short
enough for a unix socket path. Interface names stay within the kernel's 15 characters.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PREFIX = "bkc"
HUB_NETNS = f"{PREFIX}-hub"
BRIDGE = f"{PREFIX}0"
NET = "10.77.0"  # the hub's /24: only inside our namespaces, never on the host
HUB_ADDRESS = f"{NET}.1"
PREFIX_LEN = 24
RUN_ROOT = Path("/run/bandkit-cluster")
NETNS_DIR = Path("/run/netns")  # where `ip netns` keeps its names
OWNER_FILE = RUN_ROOT / "home"  # the home of the cluster that holds the machine-wide names
MAX_NODES = 9
MANAGER_PORT = 2377


@dataclass(frozen=True)
class Node:
    """Node `index` (1-based) of the cluster; node 1 is the first manager."""

    index: int

    @property
    def name(self) -> str:  # its hostname, and so its swarm node name
        return f"node{self.index}"

    @property
    def netns(self) -> str:
        return f"{PREFIX}-{self.name}"

    @property
    def veth(self) -> str:  # the hub-side end; the node side is eth0 in its namespace
        return f"{PREFIX}-{self.name}"

    @property
    def address(self) -> str:
        return f"{NET}.{10 + self.index}"

    @property
    def cgroup_parent(self) -> str:  # its containers' cgroups, under every hierarchy
        return f"bandkit-cluster-{self.name}"

    @property
    def tag(self) -> str:  # BANDKIT_TAG of its daemon and everything that daemon starts
        return f"bandkit-cluster/{self.name}"

    @property
    def run(self) -> Path:
        return RUN_ROOT / self.name

    @property
    def socket(self) -> Path:
        return self.run / "docker.sock"

    @property
    def docker_host(self) -> str:
        return f"unix://{self.socket}"


@dataclass(frozen=True)
class Layout:
    """A cluster's home (`<run_dir>/cluster`) and the files under it."""

    home: Path

    @classmethod
    def of(cls, run_dir: Path) -> Layout:
        return cls(Path(run_dir).absolute() / "cluster")

    @property
    def manifest(self) -> Path:
        return self.home / "manifest.json"

    @property
    def nodes_dir(self) -> Path:  # every node's directory; a tmpfs when in memory (`memory`)
        return self.home / "nodes"

    def node_dir(self, node: Node) -> Path:
        return self.nodes_dir / node.name

    def data_root(self, node: Node) -> Path:
        return self.node_dir(node) / "data"

    def etc(self, node: Node) -> Path:  # bind-mounted as the node's /etc/docker
        return self.node_dir(node) / "etc"

    def daemon_json(self, node: Node) -> Path:
        return self.etc(node) / "daemon.json"

    def resolv_conf(self, node: Node) -> Path:
        return self.node_dir(node) / "resolv.conf"

    def log(self, node: Node) -> Path:
        return self.node_dir(node) / "dockerd.log"


def nodes(count: int) -> tuple[Node, ...]:
    return tuple(Node(i) for i in range(1, count + 1))
