"""A docker sandbox reaches the host only at its egress proxy (`-m docker`, real iptables).

A TCP service and a UDP service bound to 0.0.0.0 on the host stand for sshd, a dev
server or a database. From inside a real sandbox (uid 1000, as the agent runs), TCP to
that service on the gateway address and on another host address, UDP to it, DNS to the
gateway and an ICMP echo to the gateway all get nothing within a short deadline, and
the services saw no packet; the egress proxy still answers (a platform request through
it gets the platform's answer). Re-installing the firewall is a no-op; teardown leaves
none of this run's rules, and a rule someone else made with a similar name is kept.

Without the host firewall (`host_firewall=False`, or the hook removed) this test fails:
the container reaches the host's service.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.runtimes import hostguard
from tests.security.support import hostile_sandbox

pytestmark = pytest.mark.docker

DEADLINE_S = 2.0  # per probe; they run in parallel inside the container
PROBE = r"""
import json, os, socket, struct, sys, threading, urllib.error, urllib.request
gateway, other, tcp, udp, deadline = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:5]), 2.0
out = {}

def tcp_probe(key, host, port):
    try:
        with socket.create_connection((host, port), timeout=deadline) as s:
            s.settimeout(deadline)
            out[key] = "reached: %r" % s.recv(64)
    except OSError as exc:
        out[key] = "blocked: " + type(exc).__name__

def udp_probe(key, port, payload):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(deadline)
        try:
            s.sendto(payload, (gateway, port))
            out[key] = "reached: %r" % s.recv(64)
        except OSError as exc:
            out[key] = "blocked: " + type(exc).__name__

def icmp_probe():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP) as s:
            s.settimeout(deadline)
            s.sendto(struct.pack("!BBHHH", 8, 0, 0, 0, 1) + b"bandkit", (gateway, 0))
            out["icmp"] = "reached: %r" % s.recv(64)[:1]
    except OSError as exc:
        out["icmp"] = "blocked: " + type(exc).__name__

def proxy_probe():
    url = os.environ["BAND_REST_URL"] + "/api/v1/agent/me"  # via HTTP_PROXY (the egress proxy)
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            out["proxy"] = [r.status, r.read(200).decode(errors="replace")]
    except urllib.error.HTTPError as exc:
        out["proxy"] = [exc.code, exc.read(200).decode(errors="replace")]
    except OSError as exc:
        out["proxy"] = [0, repr(exc)]

dns = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x04pypi\x03org\x00\x00\x01\x00\x01"
probes = [
    threading.Thread(target=tcp_probe, args=("tcp-gateway", gateway, tcp)),
    threading.Thread(target=tcp_probe, args=("tcp-other-address", other, tcp)),
    threading.Thread(target=udp_probe, args=("udp", udp, b"bandkit-probe")),
    threading.Thread(target=udp_probe, args=("dns", 53, dns)),
    threading.Thread(target=icmp_probe),
    threading.Thread(target=proxy_probe),
]
for t in probes:
    t.start()
for t in probes:
    t.join()
print(json.dumps(out))
"""


class HostServices:
    """A TCP and a UDP service on 0.0.0.0 (free ports) that record every peer."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("0.0.0.0", 0))  # noqa: S104 (the point of the test)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", 0))  # noqa: S104
        self.peers: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._serve_tcp, daemon=True),
            threading.Thread(target=self._serve_udp, daemon=True),
        ]

    @property
    def ports(self) -> tuple[int, int]:
        return self.tcp.getsockname()[1], self.udp.getsockname()[1]

    def _serve_tcp(self) -> None:
        self.tcp.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, peer = self.tcp.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.peers.append(f"tcp {peer[0]}")
            with conn:
                conn.sendall(b"host-service\n")

    def _serve_udp(self) -> None:
        self.udp.settimeout(0.2)
        while not self._stop.is_set():
            try:
                _data, peer = self.udp.recvfrom(512)
            except TimeoutError:
                continue
            except OSError:
                return
            self.peers.append(f"udp {peer[0]}")
            self.udp.sendto(b"host-service", peer)

    def __enter__(self) -> HostServices:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self.tcp.close()
        self.udp.close()


@pytest.fixture
def services() -> Iterator[HostServices]:
    with HostServices() as running:
        yield running


def table(binary: str) -> str:
    return subprocess.run(
        [binary, "-w", "5", "-S"], capture_output=True, text=True, check=True, timeout=30
    ).stdout


def ours(binary: str, chain: str) -> list[str]:
    """The rules of `binary`'s filter table that are this box's: its chain's, and the
    jumps to it."""
    return [line for line in table(binary).splitlines() if chain in line]


def other_host_address(bridge: str) -> str:
    """An IPv4 address of the host on another interface (eth0, docker0, ...)."""
    out = subprocess.run(
        ["ip", "-j", "-4", "addr"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    for link in json.loads(out):
        if link["ifname"] not in ("lo", bridge):
            for addr in link.get("addr_info", []):
                return str(addr["local"])
    pytest.fail("the host has no IPv4 address besides loopback and the sandbox bridge")


def sandbox_network(name: str) -> tuple[str, str]:
    """(network, gateway) of the container, as Docker reports them."""
    out = subprocess.run(
        ["docker", "inspect", "--type", "container", "--format", "{{json .NetworkSettings}}", name],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    [(network, entry)] = json.loads(out)["Networks"].items()
    return str(network), str(entry["Gateway"])


def plant_foreign(tools: hostguard.Tools, bridge: str, chain: str) -> list[list[str]]:
    """Rules someone else made, named like ours: a chain one digit off and an INPUT rule
    on our bridge with a bandkit-like comment. Returns their -D/-X undo commands."""
    similar = chain[:-1] + ("0" if chain[-1] != "0" else "1")
    rule = ["-i", bridge, "-m", "comment", "--comment", "bandkit:someone-else", "-j", "RETURN"]
    for argv in (["-N", similar], ["-A", similar, "-j", "RETURN"], ["-A", "INPUT", *rule]):
        subprocess.run([tools.iptables, "-w", "5", *argv], check=True, timeout=30)
    return [["-D", "INPUT", *rule], ["-F", similar], ["-X", similar]]


def test_the_sandbox_reaches_the_host_only_at_its_egress_proxy(
    services: HostServices, kit_image: str
) -> None:
    tools = hostguard.Tools.find()
    tcp, udp = services.ports
    undo: list[list[str]] = []
    try:
        with hostile_sandbox(kit_image, "sec-hostfw-") as box:
            network, gateway = sandbox_network(box.name)
            _network_id, bridge = hostguard.network_facts("docker", network)
            argv = ["/opt/band/venv/bin/python", "-c", PROBE, gateway, other_host_address(bridge)]
            result = box.runtime.exec(box.name, [*argv, str(tcp), str(udp)], timeout=60)
            assert result.returncode == 0, result.stderr[-2000:]
            seen = json.loads(result.stdout)
            for key in ("tcp-gateway", "tcp-other-address", "udp", "dns", "icmp"):
                assert seen[key].startswith("blocked"), (key, seen)
            assert services.peers == []
            status, body = seen["proxy"]
            assert status not in (0, 403), seen["proxy"]  # the platform answered through it
            assert "blocked by egress policy" not in body

            boxdir = box.run_dir / "runtimes" / "docker" / "docker" / box.name
            guard = hostguard.read_record(boxdir)
            assert guard is not None
            assert (guard.bridge, guard.gateway) == (bridge, gateway)
            assert f"docker/{box.name}/firewall" in Path(box.manifest).read_text()
            comment = f"bandkit:{guard.run_id}"
            before = (ours(tools.iptables, guard.chain), ours(tools.ip6tables, guard.chain))
            assert f"-A INPUT -i {guard.bridge} -m comment --comment" in "\n".join(before[0])
            hostguard.reinstall(boxdir, tools)
            # idempotent: this box's rules as they were (Docker's own rules may change
            # meanwhile: other tests make and remove networks on the same daemon)
            assert (ours(tools.iptables, guard.chain), ours(tools.ip6tables, guard.chain)) == before
            undo = plant_foreign(tools, guard.bridge, guard.chain)
            kept = [line for line in table(tools.iptables).splitlines() if "someone-else" in line]
        after = table(tools.iptables) + table(tools.ip6tables)
        assert comment not in after
        assert hostguard.leftovers(guard.run_id, tools) == []
        assert guard.chain not in after
        assert kept
        assert all(line in after for line in kept)
        assert undo[1][1] in after  # the similar chain too
    finally:
        for argv in undo:
            subprocess.run([tools.iptables, "-w", "5", *argv], check=False, timeout=30)
