"""Drain a swarm node so that the kit's sandboxes move off it without Docker Engine's
overlay join race (`cluster.drain`).

A plain drain (`docker node update --availability drain`) places every moved task at
once, and each joins its sandbox's overlay on its new node while the drained node still
holds it. Engine 20.10's network table answers two concurrent joins by one node towards
one peer with a single acknowledgement, so one of them waits out a fixed 30 s
(moby/moby#41524, `Bulk sync to node ... timed out` in that node's daemon log), and the
agent it carries waits with it.

A join happens when a task lands on a node that lacks one of its networks: its sandbox's
internal overlay, and for a credential proxy also `bandkit-egress`, the overlay every
proxy shares (on each node that runs one). Here the swarm still places every task; the
kit only orders the moves so that no node ever joins two networks at once:

1. A service of a sandbox whose other service (agent or credential proxy) runs on another
   node gets the constraint `node.hostname==<that node>`: its sandbox's network is already
   there. These are all moved at once, but for one proxy per node that has no proxy yet,
   moved first and alone (it joins the egress overlay there).
2. A sandbox with both services on the node moves one sandbox at a time, each until its
   new tasks are prepared (their networks joined): its agent goes where the swarm puts
   it (`node.hostname!=<node>`), its proxy to another node (`!=` that one too), as the
   two were placed, each joining only its sandbox's network; when a node they may land
   on runs no proxy yet (no egress overlay), or no other node takes the proxy within
   SPREAD_WAIT_S, the proxy goes beside its agent instead (`node.hostname==<its node>`,
   joining at most the egress overlay) once the agent is prepared there.
3. Once every moved service runs on another node, the node is drained (whatever else runs
   there is moved by the swarm), and the constraints are taken away again: a placed task
   stays where it is when only its constraints change.

Constraints are added in the same `service update` as a `bandkit.pin` label that records
them (`;`-separated), so a drain killed at any point leaves services that the next
`cluster.drain` (either way) finds by that label and frees. For that, every drain starts
by freeing every pin it finds: run one drain at a time. The services moved are the kit's
(label `bandkit.sandbox`), whichever run made them; nothing else is touched but the
node's availability.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.docker.ownership import LABEL, OWNER_LABEL
from bandkit.runtimes.swarm.objects import PROXY_PREFIX, ps
from bandkit.terminal import printable

PIN_LABEL = "bandkit.pin"  # on a service cluster.drain constrained: the constraints it added
PIN = re.compile(r"node\.hostname(==|!=)[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
PREPARED = frozenset({"Ready", "Starting", "Running"})  # its networks are joined by then
PLACED = frozenset({"Assigned", "Accepted", "Preparing"}) | PREPARED  # it has its node
JOIN_WAIT_S = 30.0  # a move that joins is given this long to be prepared before the next
SPREAD_WAIT_S = 5.0  # a proxy sent away from its agent's node is placed by then, or stays
MOVE_TIMEOUT_S = 120.0  # every moved service runs on another node by then
POLL_S = 0.2

Log = Callable[[str], None]


@dataclass(frozen=True)
class Move:
    """The services of one sandbox on the node to drain, and the node its other service
    runs on ("" when none runs elsewhere: both move, one at a time)."""

    sandbox: str
    services: tuple[str, ...]
    beside: str

    def proxies(self) -> tuple[str, ...]:
        return tuple(s for s in self.services if s.startswith(PROXY_PREFIX))

    def agents(self) -> tuple[str, ...]:
        return tuple(s for s in self.services if not s.startswith(PROXY_PREFIX))


@dataclass(frozen=True)
class Drained:
    node: str
    moves: tuple[Move, ...]
    seconds: float

    def line(self) -> str:
        services = sum(len(m.services) for m in self.moves)
        alone = sum(not m.beside for m in self.moves)
        return (
            f"{self.node} drained in {self.seconds:.1f}s: {services} service(s) of "
            f"{len(self.moves)} sandbox(es) moved ({len(self.moves) - alone} beside their "
            f"other half, {alone} one at a time)"
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
        beside = sorted({where for _s, where in services if where not in ("", node)})
        if here:
            moves.append(Move(sandbox, here, beside[0] if beside else ""))
    return moves


def _proxied(placed: Mapping[str, tuple[str, str]]) -> set[str]:
    """The nodes a credential proxy runs on: each has the egress overlay."""
    return {where for s, (_box, where) in placed.items() if s.startswith(PROXY_PREFIX) and where}


def first_proxies(moves: Sequence[Move], placed: Mapping[str, tuple[str, str]]) -> list[Move]:
    """Of the moves beside another half, one per node that runs no proxy yet and that a
    proxy moves to: that proxy joins the egress overlay there."""
    have = _proxied(placed)
    first: dict[str, Move] = {}
    for move in moves:
        if move.beside and move.proxies() and move.beside not in have:
            first.setdefault(move.beside, move)
    return list(first.values())


def drain(engine: Engine, node: str, *, out: Log) -> Drained:
    """Move the kit's services off `node` as the module says, then drain it."""
    began = time.monotonic()
    active = _known(engine, node) - {node}
    unpin(engine, out=out)
    placed = _placed(engine)
    moves = plan(node, placed)
    first = first_proxies(moves, placed)
    together = [m for m in moves if m.beside and m not in first]
    alone = [m for m in moves if not m.beside]
    out(
        f"{node}: moving {len(moves)} sandbox(es) off it: {len(moves) - len(alone)} beside "
        f"their other half, {len(alone)} one at a time"
    )
    try:
        for move in first:
            _pin(engine, move.services, f"node.hostname=={move.beside}")
            _wait(engine, move.services, node, PREPARED, JOIN_WAIT_S, strict=False)
        for move in together:
            _pin(engine, move.services, f"node.hostname=={move.beside}")
        egress = {m.beside for m in first} | _proxied(placed)
        for done, move in enumerate(alone, 1):
            egress |= _one_at_a_time(engine, move, node, spread=active <= egress, out=out)
            name = move.sandbox.split("/", 1)[-1]  # owner/name
            out(f"{printable(name)}: moved ({done} of {len(alone)} one at a time)")
        services = tuple(s for m in moves for s in m.services)
        _wait(engine, services, node, frozenset({"Running"}), MOVE_TIMEOUT_S, strict=True)
        engine.run("node", "update", "--availability", "drain", node, what="node update")
    finally:
        unpin(engine, out=out)
    return Drained(node, tuple(moves), time.monotonic() - began)


def _one_at_a_time(engine: Engine, move: Move, node: str, *, spread: bool, out: Log) -> set[str]:
    """Both services off `node`, until prepared; the nodes its proxies landed on.

    When `spread` (every node they may land on runs a proxy: each joins only its
    sandbox's network) the agent goes where the swarm puts it and the proxy to another
    node, as they were placed (beside the agent if no other node takes it within
    SPREAD_WAIT_S); else the agent first, then its proxy beside it (a proxy joins at most
    the egress overlay). One half alone goes where the swarm puts it."""
    away = f"node.hostname!={node}"
    agents, proxies = move.agents(), move.proxies()
    if not agents or not proxies:
        _pin(engine, move.services, away)
        _wait(engine, move.services, node, PREPARED, JOIN_WAIT_S, strict=False)
    else:
        _pin(engine, agents, away)
        _wait(engine, agents, node, PLACED if spread else PREPARED, JOIN_WAIT_S, strict=False)
        landed = _nodes(engine, agents[:1], node)
        if landed and spread:
            _pin(engine, proxies, away, f"node.hostname!={landed[0]}")
            if not _wait(engine, proxies, node, PLACED, SPREAD_WAIT_S, strict=False):
                for proxy in proxies:
                    _unpin(engine, proxy, f"{away};node.hostname!={landed[0]}", out)
        if not _nodes(engine, proxies, node):
            beside = f"node.hostname=={landed[0]}" if landed else away
            _pin(engine, proxies, beside)
        _wait(engine, move.services, node, PREPARED, JOIN_WAIT_S, strict=False)
    return set(_nodes(engine, proxies, node))


def _nodes(engine: Engine, services: Sequence[str], node: str) -> list[str]:
    """The nodes other than `node` that tasks meant to run of `services` are on."""
    return [w for _s, w, _state in _tasks(engine, services) if w not in ("", node)]


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
    for service, recorded in (row.split("\t", 1) for row in rows if "\t" in row):
        _unpin(engine, service, recorded, out)


def _label(key: str) -> str:
    """The Go template of a service's label `key` (`docker service inspect --format`)."""
    return '{{index .Spec.Labels "' + key + '"}}'


def _known(engine: Engine, node: str) -> set[str]:
    """The swarm's nodes that take tasks (`node` is one of its nodes, by a unique name)."""
    rows = engine.run(
        "node", "ls", "--format", "{{.Hostname}}\t{{.Availability}}", what="node ls"
    ).stdout.splitlines()
    nodes = [row.split("\t") for row in rows if "\t" in row]
    names = [name for name, _availability in nodes]
    if node not in names:
        raise SandboxError(
            f"no node {printable(node)!r} in the swarm; its nodes: {', '.join(sorted(names))}"
        )
    if names.count(node) > 1:
        raise SandboxError(
            f"{names.count(node)} nodes are named {node!r}: drain one by its ID with "
            "`docker node update --availability drain ID`"
        )
    return {name for name, availability in nodes if availability.lower() == "active"}


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
    rows = ps(engine, services, ".Name", ".Node", ".CurrentState", running=True, check=True)
    return [
        (name.rsplit(".", 1)[0], where, state.split()[0]) for name, where, state in rows if state
    ]


def _pin(engine: Engine, services: Sequence[str], *constraints: str) -> None:
    """Add `constraints` to each service, with the label that records them (one update)."""
    added = [arg for c in constraints for arg in ("--constraint-add", c)]
    for service in services:
        engine.run(
            "service",
            "update",
            "--detach",
            "--label-add",
            f"{PIN_LABEL}={';'.join(constraints)}",
            *added,
            service,
            what="service update",
        )


def _unpin(engine: Engine, service: str, recorded: str, out: Log) -> None:
    """Take from `service` the constraints its label records, and the label."""
    args = ["--label-rm", PIN_LABEL]
    for constraint in recorded.split(";"):
        if PIN.fullmatch(constraint):  # only a constraint of the form a drain adds
            args += ["--constraint-rm", constraint]
        else:
            out(
                f"{printable(service)}: label {PIN_LABEL} names {printable(constraint)!r}, "
                "not a drain's constraint: kept"
            )
    engine.run("service", "update", "--detach", *args, service, what="service update")


def _wait(
    engine: Engine,
    services: Sequence[str],
    node: str,
    states: frozenset[str],
    timeout: float,
    *,
    strict: bool,
) -> bool:
    """Until each of `services` has a task in `states` on another node than `node`
    (True); past `timeout`, an error when `strict`, else False."""
    deadline = time.monotonic() + timeout
    while True:
        tasks = _tasks(engine, services)
        there = {s for s, where, state in tasks if where not in ("", node) and state in states}
        left = sorted(set(services) - there)
        if not left:
            return True
        if time.monotonic() > deadline:
            if not strict:
                return False
            raise SandboxError(
                f"{', '.join(left)} did not run on another node than {node} within "
                f"{timeout:.0f}s; see `docker service ps` on the swarm ({node} is not drained)"
            )
        time.sleep(POLL_S)
