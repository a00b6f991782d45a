"""Drain a swarm node so that the kit's sandboxes move off it without Docker Engine's
overlay join race (`cluster.drain`).

A plain drain (`docker node update --availability drain`) places every moved task at
once, and each joins its sandbox's overlay on its new node while the drained node still
holds it. Engine 20.10's network table answers two concurrent joins by one node towards
one peer with a single acknowledgement, so one of them waits out a fixed 30 s
(moby/moby#41524, `Bulk sync to node ... timed out` in that node's daemon log), and the
agent it carries waits with it.

Here the swarm still places every task; the kit only orders the moves:

1. A service of a sandbox whose other service (agent or credential proxy) runs on another
   node gets the constraint `node.hostname==<that node>`: its network is already there,
   so the move joins nothing. These are all moved at once.
2. A sandbox with both services on the node gets `node.hostname!=<node>` on both, one
   sandbox at a time, each until its new tasks are prepared (their network joined): no
   two joins ever race.
3. Once every moved service runs on another node, the node is drained (whatever else runs
   there is moved by the swarm), and the constraints are taken away again: a placed task
   stays where it is when only its constraints change.

Each constraint is added in the same `service update` as a `bandkit.pin` label holding it,
so a drain killed at any point leaves services that the next `cluster.drain` (either
way) finds by that label and frees. The services moved are the kit's (label
`bandkit.sandbox`), whichever run made them; nothing else is touched but the node's
availability.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.docker.ownership import LABEL, OWNER_LABEL
from bandkit.terminal import printable

PIN_LABEL = "bandkit.pin"  # on a service cluster.drain constrained: the constraint it added
PIN = re.compile(r"node\.hostname(==|!=)[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
MEANT_TO_RUN = ("--filter", "desired-state=running", "--filter", "desired-state=ready")
PREPARED = frozenset({"Ready", "Starting", "Running"})  # its networks are joined by then
JOIN_WAIT_S = 30.0  # a move that joins is given this long to be prepared before the next
MOVE_TIMEOUT_S = 120.0  # every moved service runs on another node by then
POLL_S = 0.2

Log = Callable[[str], None]


@dataclass(frozen=True)
class Move:
    """Services of one sandbox to move together, the constraint that moves them, and
    whether they join their network on a node they are new to."""

    sandbox: str
    services: tuple[str, ...]
    constraint: str
    joins: bool


@dataclass(frozen=True)
class Drained:
    node: str
    moves: tuple[Move, ...]
    seconds: float

    def line(self) -> str:
        services = sum(len(m.services) for m in self.moves)
        joins = sum(m.joins for m in self.moves)
        return (
            f"{self.node} drained in {self.seconds:.1f}s: {services} service(s) of "
            f"{len(self.moves)} sandbox(es) moved ({len(self.moves) - joins} beside their "
            f"other half, {joins} one at a time)"
        )


def plan(node: str, placed: Mapping[str, tuple[str, str]]) -> list[Move]:
    """The moves that take the kit's services off `node`: `placed` maps each service to
    (its sandbox, the node of its task meant to run, "" when not placed)."""
    by_sandbox: dict[str, list[tuple[str, str]]] = {}
    for service, (sandbox, where) in sorted(placed.items()):
        by_sandbox.setdefault(sandbox, []).append((service, where))
    moves = []
    for sandbox, services in sorted(by_sandbox.items()):
        here = tuple(s for s, where in services if where == node)
        if not here:
            continue
        beside = sorted({where for _s, where in services if where not in ("", node)})
        if beside:
            moves.append(Move(sandbox, here, f"node.hostname=={beside[0]}", joins=False))
        else:
            moves.append(Move(sandbox, here, f"node.hostname!={node}", joins=True))
    return moves


def drain(engine: Engine, node: str, *, out: Log) -> Drained:
    """Move the kit's services off `node` as the module says, then drain it."""
    began = time.monotonic()
    _known(engine, node)
    unpin(engine, out=out)
    moves = plan(node, _placed(engine))
    together = [m for m in moves if not m.joins]
    alone = [m for m in moves if m.joins]
    out(
        f"{node}: moving {len(moves)} sandbox(es) off it: {len(together)} beside their "
        f"other half, {len(alone)} one at a time"
    )
    try:
        for move in together:
            _pin(engine, move)
        for move in alone:
            _pin(engine, move)
            _wait(engine, move.services, node, PREPARED, JOIN_WAIT_S, strict=False)
        services = tuple(s for m in moves for s in m.services)
        _wait(engine, services, node, frozenset({"Running"}), MOVE_TIMEOUT_S, strict=True)
        engine.run("node", "update", "--availability", "drain", node, what="node update")
    finally:
        unpin(engine, out=out)
    return Drained(node, tuple(moves), time.monotonic() - began)


def activate(engine: Engine, node: str, *, out: Log) -> None:
    """Let `node` take tasks again (it takes new ones; the swarm moves none back)."""
    _known(engine, node)
    unpin(engine, out=out)
    engine.run("node", "update", "--availability", "active", node, what="node update")


def unpin(engine: Engine, *, out: Log) -> None:
    """Take away every constraint a drain added (a finished one's, or a killed one's)."""
    ids = engine.run(
        "service", "ls", "-q", "--filter", f"label={PIN_LABEL}", what="service ls"
    ).stdout.split()
    if not ids:
        return
    rows = engine.run(
        "service",
        "inspect",
        "--format",
        "{{.Spec.Name}}\t" + _label(PIN_LABEL),
        *ids,
        what="service inspect",
    ).stdout.splitlines()
    for service, constraint in (row.split("\t", 1) for row in rows if "\t" in row):
        args = ["--label-rm", PIN_LABEL]
        if PIN.fullmatch(constraint):  # only a constraint of the form a drain adds
            args += ["--constraint-rm", constraint]
        else:
            out(f"{printable(service)}: label {PIN_LABEL} holds no drain's constraint; removed")
        engine.run("service", "update", "--detach", *args, service, what="service update")


def _label(key: str) -> str:
    """The Go template of a service's label `key` (`docker service inspect --format`)."""
    return '{{index .Spec.Labels "' + key + '"}}'


def _known(engine: Engine, node: str) -> None:
    names = engine.run("node", "ls", "--format", "{{.Hostname}}", what="node ls").stdout.split()
    if node not in names:
        raise SandboxError(
            f"no node {printable(node)!r} in the swarm; its nodes: {', '.join(sorted(names))}"
        )
    if names.count(node) > 1:
        raise SandboxError(
            f"{names.count(node)} nodes are named {node!r}: drain one by its ID with "
            "`docker node update --availability drain ID`"
        )


def _placed(engine: Engine) -> dict[str, tuple[str, str]]:
    """Each of the kit's services: (its sandbox, the node of its task meant to run)."""
    ids = engine.run(
        "service", "ls", "-q", "--filter", f"label={LABEL}", what="service ls"
    ).stdout.split()
    if not ids:
        return {}
    rows = engine.run(
        "service",
        "inspect",
        "--format",
        "{{.Spec.Name}}\t" + _label(OWNER_LABEL) + "/" + _label(LABEL),
        *ids,
        what="service inspect",
    ).stdout.splitlines()
    sandbox = dict(row.split("\t", 1) for row in rows if "\t" in row)
    nodes = {s: where for s, where, _state in _tasks(engine, sorted(sandbox))}
    return {s: (box, nodes.get(s, "")) for s, box in sandbox.items()}


def _tasks(engine: Engine, services: Sequence[str]) -> list[tuple[str, str, str]]:
    """(service, node, current state) of each task meant to run of `services`."""
    if not services:
        return []
    rows = engine.run(
        "service",
        "ps",
        *MEANT_TO_RUN,
        "--format",
        "{{.Name}}\t{{.Node}}\t{{.CurrentState}}",
        *services,
        what="service ps",
    ).stdout.splitlines()
    found = []
    for row in rows:
        parts = row.split("\t")
        if len(parts) == 3 and parts[2]:
            found.append((parts[0].rsplit(".", 1)[0], parts[1], parts[2].split()[0]))
    return found


def _pin(engine: Engine, move: Move) -> None:
    for service in move.services:
        engine.run(
            "service",
            "update",
            "--detach",
            "--label-add",
            f"{PIN_LABEL}={move.constraint}",
            "--constraint-add",
            move.constraint,
            service,
            what="service update",
        )


def _wait(
    engine: Engine,
    services: Sequence[str],
    node: str,
    states: frozenset[str],
    timeout: float,
    *,
    strict: bool,
) -> None:
    """Until each of `services` has a task in `states` on another node than `node`;
    past `timeout`, an error when `strict`, else on."""
    deadline = time.monotonic() + timeout
    while True:
        tasks = _tasks(engine, services)
        there = {s for s, where, state in tasks if where not in ("", node) and state in states}
        left = sorted(set(services) - there)
        if not left:
            return
        if time.monotonic() > deadline:
            if not strict:
                return
            raise SandboxError(
                f"{', '.join(left)} did not run on another node than {node} within "
                f"{timeout:.0f}s; see `docker service ps` on the swarm ({node} is not drained)"
            )
        time.sleep(POLL_S)
