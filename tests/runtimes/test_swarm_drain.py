"""`cluster.drain` against a swarm modelled in memory: the order of its moves (each
sandbox beside its other half at once, the ones that join a network one at a time), the
constraints it adds and always takes away, and what it does when a move cannot finish."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bandkit.runtimes.base import ExecResult, SandboxError
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.swarm import drain
from tests.runtimes.helpers import refused

PREPARING_POLLS = 2  # a moved task is Preparing for this many `service ps` calls


@dataclass
class Service:
    sandbox: str  # "owner/name", as its labels say
    node: str
    labels: dict[str, str] = field(default_factory=dict)
    constraints: list[str] = field(default_factory=list)
    state: str = "Running"
    polls: int = 0


@dataclass
class Swarm:
    """The few `docker` commands a drain uses, on services of one task each."""

    services: dict[str, Service]
    nodes: dict[str, str] = field(
        default_factory=lambda: {n: "active" for n in ("node1", "node2", "node3")}
    )
    stuck: set[str] = field(default_factory=set)  # services no node takes
    calls: list[list[str]] = field(default_factory=list)
    joining: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)
    overlaps: list[str] = field(default_factory=list)  # two networks joined at once by a node

    def run(self, argv: list[str]) -> ExecResult:
        self.calls.append(argv)
        head, rest = argv[:2], argv[2:]
        if head == ["node", "ls"]:
            rows = [f"{n}\t{a.capitalize()}\n" for n, a in self.nodes.items()]
            return ExecResult(0, "".join(rows), "")
        if head == ["node", "update"]:
            self.nodes[rest[-1]] = rest[1]
            return ExecResult(0, "", "")
        if head == ["service", "ls"]:
            key = rest[-1].removeprefix("label=")
            named = [n for n, s in self.services.items() if key in s.labels]
            return ExecResult(0, "".join(f"{n}\n" for n in named), "")
        if head == ["service", "inspect"]:
            names = rest[2:]
            if drain.PIN_LABEL in rest[1]:
                rows = [f"{n}\t{self.services[n].labels.get(drain.PIN_LABEL, '')}" for n in names]
            else:
                rows = [f"{n}\t{self.services[n].sandbox}" for n in names]
            return ExecResult(0, "".join(f"{r}\n" for r in rows), "")
        if head == ["service", "ps"]:
            return ExecResult(0, self._ps([a for a in rest if a in self.services]), "")
        if head == ["service", "update"]:
            self._update(rest[1:-1], self.services[rest[-1]], rest[-1])  # after --detach
            return ExecResult(0, "", "")
        raise AssertionError(f"unexpected docker {argv}")

    def _ps(self, names: list[str]) -> str:
        rows = []
        for name in names:
            svc = self.services[name]
            if svc.state == "Preparing":
                svc.polls -= 1
                if svc.polls <= 0:
                    svc.state = "Running"
            rows.append(f"{name}.1\t{svc.node}\t{svc.state} 1 second ago\n")
        return "".join(rows)

    def _update(self, args: list[str], svc: Service, name: str) -> None:
        pairs = list(zip(args[0::2], args[1::2], strict=True))  # flag, value
        for flag, value in pairs:
            if flag == "--label-add":
                key, _, val = value.partition("=")
                svc.labels[key] = val
            elif flag == "--label-rm":
                svc.labels.pop(value)
            elif flag == "--constraint-add":
                svc.constraints.append(value)
            elif flag == "--constraint-rm":
                svc.constraints.remove(value)
        if self._fits(svc, svc.node):
            return  # only a constraint that the node no longer meets moves a task
        fit = [n for n in self.nodes if self._fits(svc, n) and name not in self.stuck]
        if not fit:
            svc.node, svc.state = "", "Pending"
            return
        target = min(fit, key=lambda n: (self._load(n), n))  # spread, as the swarm does
        joins = self._networks_new_to(target, name, svc)
        racing = [
            other
            for other, (where, nets) in self.joining.items()
            if where == target
            and self.services[other].state == "Preparing"
            and nets
            and nets != joins
        ]
        if len(joins) > 1 or (joins and racing):
            self.overlaps.append(f"{name} joins {sorted(joins)} on {target}; also {racing}")
        svc.node, svc.state, svc.polls = target, "Preparing", PREPARING_POLLS
        self.joining[name] = (target, joins)

    def _load(self, node: str) -> int:
        return sum(s.node == node for s in self.services.values())

    def _networks_new_to(self, node: str, name: str, svc: Service) -> frozenset[str]:
        """What a task of `name` joins on `node`: its sandbox's overlay where no other
        service of the sandbox runs; the egress overlay for a proxy where none runs."""
        others = [s for n, s in self.services.items() if n != name and s.node == node]
        nets = set()
        if all(o.sandbox != svc.sandbox for o in others):
            nets.add(f"{svc.sandbox}-in")
        if name.startswith("bkp-") and not any(
            n.startswith("bkp-") and s.node == node for n, s in self.services.items() if n != name
        ):
            nets.add("egress")
        return frozenset(nets)

    def _fits(self, svc: Service, node: str) -> bool:
        """On an active node that meets every `node.hostname==`/`!=` constraint."""
        if not node or self.nodes[node] != "active":
            return False
        for constraint in svc.constraints:
            other = constraint[len("node.hostname==") :]
            if (node == other) != constraint.startswith("node.hostname=="):
                return False
        return True

    def where(self) -> dict[str, str]:
        return {n: s.node for n, s in self.services.items()}


@dataclass(frozen=True)
class FakeEngine(Engine):
    swarm: Swarm = field(default_factory=lambda: Swarm({}))

    def run(  # type: ignore[override]
        self, *args: str, what: str, check: bool = True, **_: object
    ) -> ExecResult:
        return self.swarm.run(list(args))


def _kit(sandbox: str, node: str) -> Service:
    return Service(sandbox=f"run1/{sandbox}", node=node, labels={"bandkit.sandbox": sandbox})


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drain, "POLL_S", 0.0)


def _layout() -> Swarm:
    """node1 to drain; node3 runs no credential proxy (no egress overlay) yet."""
    return Swarm(
        {
            "a": _kit("a", "node1"),  # its proxy is on node2
            "bkp-a": _kit("a", "node2"),
            "b": _kit("b", "node1"),  # both halves on node1
            "bkp-b": _kit("b", "node1"),
            "c": _kit("c", "node3"),
            "bkp-c": _kit("c", "node1"),  # its agent is on node3
            "d": _kit("d", "node1"),  # both halves on node1
            "bkp-d": _kit("d", "node1"),
            "e": _kit("e", "node2"),  # neither half on node1
            "bkp-e": _kit("e", "node2"),
            "f": _kit("f", "node3"),
            "bkp-f": _kit("f", "node1"),  # its agent is on node3 too
            "g": _kit("g", "node2"),
            "bkp-g": _kit("g", "node2"),
            "h": _kit("h", "node1"),  # both halves on node1
            "bkp-h": _kit("h", "node1"),
        }
    )


def test_sandboxes_move_beside_their_other_half_and_no_node_joins_two_networks_at_once() -> None:
    swarm = _layout()
    swarm.nodes["node4"] = "active"  # an empty node: no network of ours there yet
    said: list[str] = []
    done = drain.drain(FakeEngine(swarm=swarm), "node1", out=said.append)
    where = swarm.where()
    assert where["a"] == "node2"  # beside its other half
    assert where["bkp-c"] == "node3"
    assert where["bkp-f"] == "node3"
    assert where["b"] == "node4"  # the swarm's pick: the empty node
    assert where["bkp-b"] == "node4"  # beside its agent: node4 ran no proxy (no egress)
    pinned: dict[str, list[str]] = {}
    for argv in swarm.calls:
        added = [argv[i + 1] for i, a in enumerate(argv) if a == "--constraint-add"]
        pinned.setdefault(argv[-1], []).extend(added)
    # after that every node ran a proxy: the agent went where the swarm put it, the proxy
    # to another node, as they were placed
    for agent in ("d", "h"):
        assert pinned[agent] == ["node.hostname!=node1"]
        assert pinned[f"bkp-{agent}"] == ["node.hostname!=node1", f"node.hostname!={where[agent]}"]
        assert where[f"bkp-{agent}"] != where[agent]
    assert "node1" not in where.values()
    assert swarm.overlaps == []
    assert swarm.nodes["node1"] == "drain"
    for name, svc in swarm.services.items():
        assert svc.constraints == [], name
        assert drain.PIN_LABEL not in svc.labels, name
        assert svc.state == "Running", name
    updated = {argv[-1] for argv in swarm.calls if argv[:2] == ["service", "update"]}
    assert updated.isdisjoint({"e", "bkp-e", "g", "bkp-g"})  # nothing else was touched
    drained = next(i for i, a in enumerate(swarm.calls) if a[:2] == ["node", "update"])
    pins = [i for i, a in enumerate(swarm.calls) if "--constraint-add" in a]
    assert max(pins) < drained  # the node is drained once every move is made
    assert [m.beside for m in done.moves] == ["node2", "", "node3", "", "node3", ""]
    assert "moving 6 sandbox(es) off it: 3 beside their other half, 3 one at a time" in said[0]
    assert said[1:] == [f"{box}: moved ({n} of 3 one at a time)" for n, box in enumerate("bdh", 1)]
    assert "9 service(s) of 6 sandbox(es) moved" in done.line()


def test_a_killed_drain_s_constraints_are_taken_away_by_the_next_run_either_way() -> None:
    swarm = _layout()
    swarm.services["a"].labels[drain.PIN_LABEL] = "node.hostname==node2"
    swarm.services["a"].constraints.append("node.hostname==node2")
    swarm.services["b"].labels[drain.PIN_LABEL] = "node.role==manager"  # not a drain's
    swarm.services["b"].constraints.append("node.role==manager")
    swarm.nodes["node1"] = "drain"
    said: list[str] = []
    drain.activate(FakeEngine(swarm=swarm), "node1", out=said.append)
    assert swarm.nodes["node1"] == "active"
    assert swarm.services["a"].constraints == []
    assert swarm.services["b"].constraints == ["node.role==manager"]  # a person's: kept
    assert all(drain.PIN_LABEL not in s.labels for s in swarm.services.values())
    assert said == [
        f"b: label {drain.PIN_LABEL} names 'node.role==manager', not a drain's constraint: kept"
    ]


def test_an_unknown_node_is_named_and_nothing_changes() -> None:
    swarm = _layout()
    with pytest.raises(SandboxError, match=r"no node 'node9'.*node1, node2, node3"):
        drain.drain(FakeEngine(swarm=swarm), "node9", out=print)
    assert [argv[:2] for argv in swarm.calls] == [["node", "ls"]]


def test_a_sandbox_no_node_takes_fails_the_drain_and_leaves_no_constraint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(drain, "MOVE_TIMEOUT_S", 0.05)
    monkeypatch.setattr(drain, "JOIN_WAIT_S", 0.05)
    swarm = _layout()
    swarm.stuck = {"bkp-b"}
    with pytest.raises(SandboxError, match=r"bkp-b did not run on another node than node1"):
        drain.drain(FakeEngine(swarm=swarm), "node1", out=print)
    assert swarm.nodes["node1"] == "active"  # not drained
    for name, svc in swarm.services.items():
        assert svc.constraints == [], name
        assert drain.PIN_LABEL not in svc.labels, name


def test_the_task_says_what_is_missing_and_what_failed_without_a_traceback(
    tmp_path: Path,
) -> None:
    env = {"PATH": "/usr/bin:/bin", "BANDKIT_SWARM_HOST": f"unix://{tmp_path}/none.sock"}
    assert "--node is required, e.g. --node node2" in refused("cluster.drain", env=env)
    assert "cluster.drain: " in refused("cluster.drain", "--node", "node2", env=env)


def test_a_proxy_no_other_node_takes_goes_beside_its_agent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One node left to move to: the proxy cannot go to another node than its agent's,
    so after SPREAD_WAIT_S it goes beside it."""
    for wait in ("SPREAD_WAIT_S", "JOIN_WAIT_S", "MOVE_TIMEOUT_S"):
        monkeypatch.setattr(drain, wait, 0.05)
    swarm = Swarm(
        {
            "b": _kit("b", "node1"),
            "bkp-b": _kit("b", "node1"),
            "e": _kit("e", "node2"),
            "bkp-e": _kit("e", "node2"),
        },
        nodes={"node1": "active", "node2": "active"},
    )
    drain.drain(FakeEngine(swarm=swarm), "node1", out=print)
    assert swarm.where() == {"b": "node2", "bkp-b": "node2", "e": "node2", "bkp-e": "node2"}
    assert swarm.nodes["node1"] == "drain"
    for name, svc in swarm.services.items():
        assert svc.constraints == [], name
        assert drain.PIN_LABEL not in svc.labels, name
