"""The swarm the nodes form: node 1 initialises it and managers and workers join it, and
what it says of its nodes.

Every call is the host's `docker` CLI pointed at one node's socket (`DOCKER_HOST` in its
environment). A join token is put in `docker swarm join`'s argv (it has no other way to
take one) only on this machine, and both tokens are rotated once every node has joined,
so the ones that passed through argv admit nobody afterwards.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bandkit import tools
from bandkit.cluster.errors import ClusterError
from bandkit.cluster.layout import MANAGER_PORT, Node

DOCKER_TIMEOUT_S = 60.0
# What every service on this kind of cluster needs: a DNS round-robin endpoint (no IPVS in
# this kernel, so the default virtual IP resolves but does not connect), no registry
# lookup of its image (offline, each costs a DNS timeout), its replicas on distinct nodes.
SERVICE_OPTIONS = (
    "--endpoint-mode",
    "dnsrr",
    "--no-resolve-image",
    "--placement-pref",
    "spread=node.id",
)
READY_TIMEOUT_S = 60.0


def docker(
    node: Node,
    *args: str,
    check: bool = True,
    timeout: float = DOCKER_TIMEOUT_S,
    input: str | None = None,
) -> str:
    """`docker ARGS` against `node`'s daemon; its stdout."""
    result = tools.run(
        ["docker", *args],
        what=f"docker {args[0]} on {node.name}",
        timeout=timeout,
        env={"DOCKER_HOST": node.docker_host},
        unset=("DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"),
        check=check,
        input=input,
        error=ClusterError,
    )
    return result.stdout


def local_state(node: Node) -> str:
    """The node's own swarm state: inactive, pending, active, error, locked."""
    return docker(node, "info", "--format", "{{.Swarm.LocalNodeState}}").strip()


def init(manager: Node) -> None:
    if local_state(manager) == "active":
        return
    docker(
        manager,
        "swarm",
        "init",
        "--advertise-addr",
        manager.address,
        "--listen-addr",
        f"{manager.address}:{MANAGER_PORT}",
    )


def _token(manager: Node, role: str, *, rotate: bool = False) -> str:
    args = ["swarm", "join-token", "--quiet"] + (["--rotate"] if rotate else []) + [role]
    return docker(manager, *args).strip()


def join(manager: Node, node: Node, role: str) -> None:
    if local_state(node) == "active":
        return
    token = _token(manager, role)
    tools.run(
        [
            "docker",
            "swarm",
            "join",
            "--token",
            token,
            "--advertise-addr",
            node.address,
            "--listen-addr",
            f"{node.address}:{MANAGER_PORT}",
            f"{manager.address}:{MANAGER_PORT}",
        ],
        what=f"docker swarm join on {node.name}",
        timeout=DOCKER_TIMEOUT_S,
        env={"DOCKER_HOST": node.docker_host},
        redact=(token,),
        error=ClusterError,
    )


def rotate_tokens(manager: Node) -> None:
    for role in ("worker", "manager"):
        _token(manager, role, rotate=True)


@dataclass(frozen=True)
class NodeRow:
    """One node as the swarm's managers see it."""

    hostname: str
    role: str  # manager (leader / reachable) or worker
    availability: str  # active, pause, drain
    state: str  # ready, down, unknown
    address: str

    def as_json(self) -> Mapping[str, str]:
        return {
            "name": self.hostname,
            "role": self.role,
            "availability": self.availability,
            "state": self.state,
            "address": self.address,
        }


def node_rows(manager: Node) -> list[NodeRow]:
    ids = docker(manager, "node", "ls", "--quiet").split()
    if not ids:
        return []
    out = json.loads(docker(manager, "node", "inspect", *ids))
    rows = []
    for item in out:
        spec, status = item.get("Spec", {}), item.get("Status", {})
        leader = (item.get("ManagerStatus") or {}).get("Leader", False)
        role = str(spec.get("Role", "?"))
        rows.append(
            NodeRow(
                hostname=str(item.get("Description", {}).get("Hostname", "?")),
                role="manager (leader)" if leader else role,
                availability=str(spec.get("Availability", "?")),
                state=str(status.get("State", "?")),
                address=str(status.get("Addr", "?")),
            )
        )
    return sorted(rows, key=lambda r: r.hostname)


def wait_ready(manager: Node, names: Sequence[str], timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait until every node in `names` is ready in the swarm."""
    deadline = time.monotonic() + timeout_s
    while True:
        rows = {r.hostname: r for r in node_rows(manager)}
        missing = [n for n in names if n not in rows or rows[n].state != "ready"]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"node(s) {', '.join(missing)} not ready in the swarm within "
                f"{timeout_s:.0f}s; run `uv run invoke cluster.status`"
            )
        time.sleep(0.3)
