"""The swarm objects a sandbox is made of (services, networks, secrets, configs), each
carrying our labels, and their removal: only an object whose owner label proves this run
made it is removed (a same-named foreign one is reported and kept); absent is success.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.docker.ownership import LABEL, OWNER_LABEL, labels

KINDS = ("service", "network", "secret", "config")
PROXY_PREFIX = "bkp-"  # every credential proxy service's name starts so
NETWORK_GONE_TIMEOUT_S = 60.0  # a removed service's tasks let go of its networks by then
POLL_S = 0.25


MEANT_TO_RUN = ("--filter", "desired-state=running", "--filter", "desired-state=ready")


def ps(
    engine: Engine,
    services: Sequence[str],
    *fields: str,
    running: bool = False,
    check: bool = False,
) -> list[list[str]]:
    """`docker service ps` of `services` (each one's newest task first), each row the
    `fields`; only the tasks meant to run when `running` (also one waiting out its restart
    delay, desired state `ready`); none when they cannot be listed, unless `check`.
    Tab-separated: a field may be empty (no node) or hold spaces (a state, an error)."""
    if not services:
        return []
    result = engine.run(
        "service",
        "ps",
        *(MEANT_TO_RUN if running else ()),
        "--no-trunc",
        "--format",
        "\t".join("{{" + field + "}}" for field in fields),
        *services,
        what="service ps",
        check=check,
    )
    if result.returncode != 0:
        return []
    rows = [line.split("\t") for line in result.stdout.splitlines()]
    return [row for row in rows if len(row) == len(fields)]


def label_args(name: str, owner: str) -> list[str]:
    return ["--label", f"{LABEL}={name}", "--label", f"{OWNER_LABEL}={owner}"]


def remove(engine: Engine, kind: str, name: str, owner: str) -> None:
    """Remove `name` when it carries `owner`'s label; a network is retried until the
    tasks of a just-removed service have let go of it, and waited for until the manager
    no longer lists it (its removal is asynchronous)."""
    found = labels(engine, kind, name)
    if found is None:
        return
    if not owner or found.get(OWNER_LABEL, "") != owner:
        raise SandboxError(
            f"swarm: {kind} {name} is not ours ({OWNER_LABEL}={found.get(OWNER_LABEL, '')!r}); "
            "kept: remove it yourself if it is stale"
        )
    deadline = time.monotonic() + (NETWORK_GONE_TIMEOUT_S if kind == "network" else 0)
    while True:
        result = engine.run(kind, "rm", name, what=f"{kind} rm", check=False)
        text = (result.stderr + result.stdout).lower()
        if result.returncode == 0 or "not found" in text or "no such" in text:
            break
        if time.monotonic() > deadline:
            raise SandboxError(f"swarm: {kind} rm {name}: {result.stderr.strip()[:300]}")
        time.sleep(POLL_S)
    while kind == "network" and _listed(engine, name, owner):
        if time.monotonic() > deadline:
            raise SandboxError(f"swarm: network {name} is still listed after its removal")
        time.sleep(POLL_S)


def _listed(engine: Engine, network: str, owner: str) -> bool:
    """Whether the manager still lists `network` among the owner's (it does for a few
    seconds after its `rm` answered, while the nodes let go of their copies)."""
    out = engine.run(
        "network",
        "ls",
        "--filter",
        f"label={OWNER_LABEL}={owner}",
        "--format",
        "{{.Name}}",
        what="network ls",
        check=False,
    ).stdout
    return network in out.split()
