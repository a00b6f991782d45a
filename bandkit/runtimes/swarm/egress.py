"""The egress overlay the credential proxies share: their way off their node, one per swarm.

Every proxy joins it beside its agent's `--internal` overlay; no agent ever does. One
shared overlay instead of one per sandbox: a node joins it once, not once per proxy it
runs (a fleet of 30 made 60 overlays before, 31 now), and a proxy moved by a drain mostly
lands on a node that has it already. Proxies meeting there gain nothing over an agent:
each listens only behind its own token, and their way on is the relay, which forwards
only to the platform.

It carries `bandkit.egress` (and `bandkit.sandbox`, empty: "some sandbox of ours", so a
search for what we left finds it). Swarm network names are not unique, so two creators at
once may make two: everyone uses the lowest ID, and the last sandbox out removes them all.
It is removed once no credential proxy service is left on the swarm; while one is, it
stays (that is not an error).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.docker.ownership import LABEL
from bandkit.runtimes.swarm.objects import PROXY_PREFIX

NAME = "bandkit-egress"
EGRESS_LABEL = "bandkit.egress"
GONE_TIMEOUT_S = 60.0  # the last proxy's tasks let go of it by then
POLL_S = 0.25
_CREATING = threading.Lock()  # one creator per process (other processes: lowest ID wins)


def ensure(engine: Engine) -> str:
    """The egress overlay's ID, made when the swarm has none."""
    with _CREATING:
        found = ids(engine)
        if not found:
            engine.run(
                "network",
                "create",
                "--driver",
                "overlay",
                "--label",
                f"{LABEL}=",
                "--label",
                f"{EGRESS_LABEL}=shared",
                NAME,
                what="network create (egress)",
            )
            found = ids(engine)
    if not found:
        raise SandboxError(f"swarm: the egress overlay {NAME} is not listed after its creation")
    return found[0]


def ids(engine: Engine) -> list[str]:
    """The IDs of the egress overlays on the swarm, lowest first."""
    out = engine.run(
        "network",
        "ls",
        "--filter",
        f"label={EGRESS_LABEL}",
        "--no-trunc",
        "--format",
        "{{.ID}}",
        what="network ls (egress)",
    ).stdout
    return sorted(out.split())


def proxies_left(engine: Engine) -> bool:
    out = engine.run(
        "service", "ls", "--filter", f"label={LABEL}", "--format", "{{.Name}}", what="service ls"
    ).stdout
    return any(name.startswith(PROXY_PREFIX) for name in out.split())


def release(
    engine: Engine,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Remove the egress overlays once no proxy service is left (the caller has removed
    its own); retried while a just-removed proxy's task still holds one. Whether they are
    gone (False: a proxy still uses them, so they stay)."""
    deadline = clock() + GONE_TIMEOUT_S
    while found := ids(engine):
        if proxies_left(engine):
            return False
        for ident in found:
            engine.run("network", "rm", ident, what="network rm (egress)", check=False)
        if not ids(engine):
            break
        if clock() > deadline:
            raise SandboxError(
                f"swarm: the egress overlay {NAME} could not be removed within "
                f"{GONE_TIMEOUT_S:.0f}s; see `docker network inspect {NAME}` on the swarm"
            )
        sleep(POLL_S)
    return True
