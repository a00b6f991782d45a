"""The egress overlay the credential proxies share, against a docker that keeps a
swarm's networks and services in a file (no daemon: the fast lane): made once, the
lowest of duplicates used, kept while a proxy is left, removed by the last one out, and
a proxy made again when another process removed it between look and create."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.swarm import SwarmRuntime, egress

FAKE = r"""
import json, sys
state_path, argv = sys.argv[1], sys.argv[2:]
state = json.load(open(state_path))
state["calls"].append(" ".join(argv))
def done(code=0, out="", err=""):
    json.dump(state, open(state_path, "w"))
    sys.stdout.write(out); sys.stderr.write(err); sys.exit(code)
kind, verb = argv[0], argv[1]
if (kind, verb) == ("network", "ls"):
    done(out="".join(n + "\n" for n in state["networks"]))
if (kind, verb) == ("network", "create"):
    state["networks"].append("n%d" % (len(state["calls"]) + 10))
    done(out=state["networks"][-1] + "\n")
if (kind, verb) == ("network", "rm"):
    if state["held"] > 0:
        state["held"] -= 1
        done(1, err="Error response from daemon: network %s is in use by task t1\n" % argv[2])
    state["networks"].remove(argv[2])
    done()
if (kind, verb) == ("service", "ls"):
    done(out="".join(s + "\n" for s in state["services"]))
if (kind, verb) == ("service", "create"):
    if "--name" not in argv:
        done(1, err="Error response from daemon: unexpected: %s\n" % argv)
    network = argv[argv.index("--network") + 1]
    if state["vanish"]:
        state["vanish"] -= 1
        state["networks"].remove(network)
        done(1, err="Error response from daemon: network %s not found\n" % network)
    state["services"].append(argv[argv.index("--name") + 1])
    done()
done(2, err="unexpected: %s\n" % argv)
"""


class Swarm:
    def __init__(self, tmp_path: Path, **state: object) -> None:
        self.path = tmp_path / "swarm.json"
        self.path.write_text(
            json.dumps({"networks": [], "services": [], "held": 0, "vanish": 0, "calls": []})
        )
        self.update(**state)
        script = tmp_path / "fake_docker.py"
        script.write_text(FAKE, encoding="utf-8")
        self.binary = tmp_path / "docker"
        self.binary.write_text(f'#!/bin/sh\nexec {sys.executable} {script} {self.path} "$@"\n')
        self.binary.chmod(0o755)
        self.engine = Engine(str(self.binary), "tcp://mgr:2376")

    def update(self, **state: object) -> None:
        self.path.write_text(json.dumps({**self.state, **state}))

    @property
    def state(self) -> dict[str, object]:
        return dict(json.loads(self.path.read_text()))

    def calls(self, verb: str) -> list[str]:
        return [c for c in self.state["calls"] if c.startswith(verb)]  # type: ignore[attr-defined]


def test_it_is_made_once_and_everyone_uses_the_lowest_of_duplicates(tmp_path: Path) -> None:
    swarm = Swarm(tmp_path)
    made = egress.ensure(swarm.engine)
    assert egress.ensure(swarm.engine) == made
    assert len(swarm.calls("network create")) == 1
    assert "--label bandkit.egress=shared" in swarm.calls("network create")[0]
    # two processes made one each at once (swarm names are not unique): the lowest wins
    swarm.update(networks=["n9", made])
    assert egress.ensure(swarm.engine) == min("n9", made)


def test_it_stays_while_a_proxy_is_left(tmp_path: Path) -> None:
    swarm = Swarm(tmp_path, networks=["n1"], services=["agent-a", "bkp-0123"])
    assert egress.release(swarm.engine) is False
    assert swarm.calls("network rm") == []
    assert swarm.state["networks"] == ["n1"]


def test_the_last_one_out_removes_them_all_once_the_tasks_let_go(tmp_path: Path) -> None:
    swarm = Swarm(tmp_path, networks=["n1", "n2"], services=["agent-a"], held=2)
    naps: list[float] = []
    assert egress.release(swarm.engine, sleep=naps.append) is True
    assert swarm.state["networks"] == []
    assert naps  # it waited for the task holding one


def test_a_network_held_past_the_deadline_is_an_error_naming_it(tmp_path: Path) -> None:
    swarm = Swarm(tmp_path, networks=["n1"], held=10**6)
    ticks = iter(range(0, 10**6, 30))
    with pytest.raises(SandboxError, match=r"bandkit-egress could not be removed within 60s"):
        egress.release(swarm.engine, clock=lambda: float(next(ticks)), sleep=lambda _s: None)


def test_a_proxy_is_made_again_when_its_egress_vanished_meanwhile(tmp_path: Path) -> None:
    swarm = Swarm(tmp_path, networks=["n1"], vanish=1)
    runtime = SwarmRuntime(tmp_path / "run", host="tcp://mgr:2376", binary=str(swarm.binary))
    runtime._create_proxy(["--name", "bkp-1", "--network", "in", "img"])
    creates = swarm.calls("service create")
    assert len(creates) == 2
    assert creates[0].startswith("service create --network n1 --name bkp-1 --network in")
    networks = swarm.state["networks"]
    assert isinstance(networks, list)
    (made,) = networks
    assert made != "n1"  # made again, under a new ID
    assert creates[1].startswith(f"service create --network {made} --name bkp-1")
    assert swarm.state["services"] == ["bkp-1"]
    # any other failure is reported at once, with what docker said
    swarm.update(vanish=0)
    with pytest.raises(SandboxError, match="unexpected"):
        runtime._create_proxy(["--bogus", "--network", "in"])
