"""The host firewall of a docker sandbox network, without Docker or root.

- the rule builder (pure): a chain per network that lets through only established
  replies and TCP to the egress proxy's port on the gateway, drops the rest (IPv6: all),
  every rule tagged `bandkit:<run id>`, jumped to from the top of INPUT by bridge;
- bad facts (they go into argv) are refused;
- through the docker runtime with recording stand-ins for docker and iptables: the
  firewall is in the manifest before the first iptables change, teardown leaves no rule,
  a re-install is a no-op, rules someone else made are kept, and a missing or failing
  iptables fails closed (no container) with what to do; `host_firewall=False` warns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bandkit.manifest import Manifest, teardown
from bandkit.runtimes import hostguard
from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker import DockerRuntime
from bandkit.runtimes.hostguard import Guard, HostGuardError, Tools
from tests.fakes.iptables import FakeIptables, fake_iptables
from tests.security.support import (
    WORKSPACES,
    FakeDocker,
    fake_docker,
    spec_for,
    stop_box_processes,
)

NETWORK_ID = "0f" * 32  # what the docker stand-in answers
CHAIN = "BANDKIT-0f0f0f0f0f0f"
GUARD = Guard("run0123abcd", "ab12" * 16, "br-ab12ab12ab12", "172.25.0.1", 40123)


def test_the_rules_admit_only_the_proxy_port_on_the_gateway() -> None:
    tag = ["-m", "comment", "--comment", "bandkit:run0123abcd"]
    chain = "BANDKIT-ab12ab12ab12"
    v4 = ["iptables", "-w", "5"]
    v6 = ["ip6tables", "-w", "5"]
    proxy = ["-d", "172.25.0.1/32", "-p", "tcp", "-m", "tcp", "--dport", "40123"]
    jump = ["-I", "INPUT", "1", "-i", "br-ab12ab12ab12", *tag, "-j", chain]
    assert hostguard.rules(GUARD) == [
        [*v4, "-N", chain],
        [*v4, "-A", chain, "-m", "conntrack", "--ctstate", "ESTABLISHED", *tag, "-j", "RETURN"],
        [*v4, "-A", chain, *proxy, *tag, "-j", "RETURN"],
        [*v4, "-A", chain, *tag, "-j", "DROP"],
        [*v4, *jump],
        [*v6, "-N", chain],
        [*v6, "-A", chain, *tag, "-j", "DROP"],
        [*v6, *jump],
    ]
    assert len(chain) <= 28  # iptables' chain name limit


@pytest.mark.parametrize(
    ("field", "bad"),
    [
        ("bridge", "br-x; rm -rf /"),
        ("bridge", "a-bridge-name-too-long"),
        ("bridge", "-j ACCEPT"),
        ("gateway", "fe80::1"),
        ("gateway", "0.0.0.0/0"),
        ("port", 0),
        ("port", 65536),
        ("network_id", "not-hex"),
        ("run_id", "bandkit x"),
    ],
)
def test_bad_facts_are_refused(field: str, bad: object) -> None:
    facts: dict[str, object] = {**GUARD.__dict__, field: bad}
    with pytest.raises(HostGuardError):
        Guard(**facts)  # type: ignore[arg-type]


def test_the_bridge_is_the_networks_option_or_br_and_the_short_id() -> None:
    assert hostguard.bridge_name("ab" * 32, {}) == "br-abababababab"
    opts = {"com.docker.network.bridge.name": "sandbox0"}
    assert hostguard.bridge_name("ab" * 32, opts) == "sandbox0"


def _create(
    tmp_path: Path, iptables: FakeIptables | None = None, *, host_firewall: bool = True
) -> tuple[FakeDocker, DockerRuntime]:
    fake = fake_docker(tmp_path / "bin")
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "band.yaml").write_text(WORKSPACES["no-credentials-section"])
    tools = (iptables or fake.iptables).tools
    with Manifest.open(tmp_path / "m.json") as manifest:
        rt = DockerRuntime(
            tmp_path / "run",
            manifest=manifest,
            binary=str(fake.binary),
            firewall=tools,
            host_firewall=host_firewall,
        )
        try:
            rt.create(spec_for(ws))
        finally:
            stop_box_processes(tmp_path / "run", "box-1")
    return fake, rt


def _teardown(tmp_path: Path, rt: DockerRuntime) -> list[str]:
    with Manifest.open(tmp_path / "m.json") as manifest:
        runtime = DockerRuntime(
            tmp_path / "run", manifest=manifest, binary=rt.binary, firewall=rt.firewall
        )
        report = teardown(manifest, runtime.removers())
        return report.lines() if not report.clean else []


def test_recorded_before_installed_torn_down_to_nothing_and_foreign_rules_kept(
    tmp_path: Path,
) -> None:
    iptables = fake_iptables(tmp_path / "ipt", manifest=tmp_path / "m.json")
    foreign = ["-A", "INPUT", "-i", "br-0f0f0f0f0f0f", "-m", "comment"]
    iptables.add("iptables", *foreign, "--comment", "bandkit:someone-else", "-j", "RETURN")
    iptables.add("iptables", "-N", "BANDKIT-0f0f0f0f0f0e")  # a similar name, not ours
    iptables.add("iptables", "-A", "BANDKIT-0f0f0f0f0f0e", "-j", "DROP")
    kept = iptables.lines()
    fake, rt = _create(tmp_path, iptables)
    comment = f"bandkit:{rt.run_id}"
    for binary in ("iptables", "ip6tables"):
        changes = [c for c in iptables.data(binary)["calls"] if c["argv"][0] != "-S"]
        assert changes, binary
        assert all("docker/box-1/firewall" in c["manifest"] for c in changes)
        ours = [line for line in iptables.lines(binary) if comment in line]
        assert f"-N {CHAIN}" in iptables.lines(binary)
        assert [line for line in iptables.lines(binary) if line.startswith(f"-A {CHAIN}")] == [
            line for line in ours if line.startswith(f"-A {CHAIN}")
        ]
    [jump] = [line for line in iptables.lines() if line.startswith("-A INPUT") and comment in line]
    assert jump == f"-A INPUT -i br-0f0f0f0f0f0f -m comment --comment {comment} -j {CHAIN}"
    assert iptables.lines()[0] == jump  # first in INPUT: before anyone's ACCEPT
    assert "--dport" in " ".join(iptables.lines())
    assert len(hostguard.leftovers(rt.run_id, iptables.tools)) == 4 + 2  # chain rules + jumps
    assert fake.data()["created"]  # the container came after the firewall
    assert not rt.warnings

    before = iptables.lines()
    hostguard.reinstall(tmp_path / "run" / "docker" / "box-1", iptables.tools)
    assert iptables.lines() == before  # idempotent: nothing duplicated or changed

    rt.remove("box-1")  # the direct path (kit/demo teardown) removes them too, by the box's record
    assert iptables.lines() == kept
    assert iptables.lines("ip6tables") == []
    assert hostguard.leftovers(rt.run_id, iptables.tools) == []
    assert _teardown(tmp_path, rt) == []  # then the manifest's: already gone is success
    assert iptables.lines() == kept
    assert not (tmp_path / "m.json").exists()


def test_a_same_named_chain_that_is_not_ours_fails_closed_and_is_kept(tmp_path: Path) -> None:
    iptables = fake_iptables(tmp_path / "ipt")
    iptables.add("iptables", "-N", CHAIN)
    iptables.add("iptables", "-A", CHAIN, "-j", "ACCEPT")
    with pytest.raises(SandboxError, match=r"did not make .*; kept it"):
        _create(tmp_path, iptables)
    assert iptables.lines() == [f"-N {CHAIN}", f"-A {CHAIN} -j ACCEPT"]
    assert not json.loads((tmp_path / "bin" / "docker-state.json").read_text())["created"]


@pytest.mark.parametrize("broken", ["missing", "fails"])
def test_no_working_iptables_means_no_container(tmp_path: Path, broken: str) -> None:
    if broken == "missing":
        iptables = FakeIptables(tmp_path / "nowhere")
    else:
        iptables = fake_iptables(tmp_path / "ipt", fail_on="-A")
    with pytest.raises(SandboxError) as caught:
        _create(tmp_path, iptables)
    message = str(caught.value)
    assert "apt-get install iptables" in message
    assert "BANDKIT_HOST_FIREWALL=off" in message  # an opt-out the user can reach
    assert "\n" not in message
    assert not json.loads((tmp_path / "bin" / "docker-state.json").read_text())["created"]


def test_the_opt_out_is_explicit_and_warned(tmp_path: Path) -> None:
    iptables = fake_iptables(tmp_path / "ipt")
    fake, rt = _create(tmp_path, iptables, host_firewall=False)
    assert fake.data()["created"]
    assert iptables.data()["calls"] == []
    assert any("host firewall is off" in w for w in rt.warnings)
    assert DockerRuntime(tmp_path / "other").host_firewall is True  # the default


@pytest.mark.parametrize(("value", "on"), [("off", False), ("0", False), ("", True), ("on", True)])
def test_the_environment_opt_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, on: bool
) -> None:
    monkeypatch.setenv("BANDKIT_HOST_FIREWALL", value)
    assert DockerRuntime(tmp_path).host_firewall is on


def test_the_default_tools_are_absolute_paths() -> None:
    tools = Tools.find()
    assert tools.iptables.startswith("/")
    assert tools.iptables.endswith("/iptables")
    assert tools.ip6tables.startswith("/")
    assert tools.ip6tables.endswith("/ip6tables")
