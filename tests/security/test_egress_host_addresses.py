"""The egress proxy connects from the host, so the host firewall never sees where it goes:
a wildcard grant (`**`, or `**.domain` whose DNS the sandbox controls) must not reach this
host's own addresses (eth0, docker0 and the other bridges), its networks, or private,
shared and link-local ranges. Only a rule naming the exact address does, and so does the
platform route the runtime pins (the local platform lives on 127.0.0.1).

Real proxy on 127.0.0.1, real upstream sockets on this host's own interface addresses. A
sandbox's DNS is the one stand-in: `socket.getaddrinfo` answers the test's own names
(`*.sandbox-dns.test`) with the addresses a hostile resolver would give.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import pytest_socket

from bandkit.proxies import egress
from bandkit.proxies.egress import server as egress_server
from tests.security.conftest import EchoUpstream
from tests.security.support import egress_proxy as serve_proxy
from tests.security.support import status, tunnel

SANDBOX_DNS = "sandbox-dns.test"  # a domain whose DNS the sandbox controls (stand-in)
INNER = b"GET /reached HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
# Private, shared and link-local addresses that are not on this host: nothing answers
# there, so on code that lets them through the test sees a 502 instead of the 403.
ELSEWHERE = [
    "10.255.254.253",
    "100.64.254.253",
    "172.31.254.253",
    "192.168.254.253",
    "169.254.169.254",
    "fd12:3456::1",
    "fe80::1",
]


def own_addresses() -> list[str]:
    """This host's own interface addresses that a server can bind without a scope (no
    loopback, no link-local), as `ip -j addr` lists them (else the kernel, via /proc)."""
    out: list[str] = []
    if shutil.which("ip"):
        listing = subprocess.run(
            ["ip", "-j", "addr"], capture_output=True, text=True, check=True, timeout=10
        ).stdout
        out = [a["local"] for i in json.loads(listing) for a in i.get("addr_info", [])]
    else:
        with open("/proc/net/if_inet6", encoding="ascii") as fh:
            out = [str(ipaddress.ip_address(bytes.fromhex(line.split()[0]))) for line in fh]
    return [
        a
        for a in out
        if not ipaddress.ip_address(a).is_loopback and not ipaddress.ip_address(a).is_link_local
    ]


def target(address: str, port: int) -> str:
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


@pytest.fixture
def box(tmp_path: Path) -> Path:
    path = tmp_path / "box"
    path.mkdir(mode=0o700)
    return path


@pytest.fixture
def own_upstreams() -> Iterator[list[EchoUpstream]]:
    """An echo server on each of this host's own (non-loopback) addresses. The unit lane
    denies every address but loopback; these are this machine's own too, so the test lets
    the proxy reach them (and still nothing beyond this host)."""
    addresses = own_addresses()
    if not addresses:
        pytest.skip("this host has no address but loopback and link-local")
    pytest_socket.socket_allow_hosts(
        ["127.0.0.1", "::1", "localhost", *addresses], allow_unix_socket=True
    )
    with ExitStack() as stack:
        yield [stack.enter_context(EchoUpstream(host=a)) for a in addresses]


@pytest.fixture
def sandbox_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names under SANDBOX_DNS answer what the test puts here; every lookup is counted
    under `_lookups`. All other names resolve as usual."""
    answers: dict[str, list[str]] = {"_lookups": []}
    real = socket.getaddrinfo

    def resolve(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(host, str) and host.endswith("." + SANDBOX_DNS):
            answers["_lookups"].append(host)
            return [
                (
                    socket.AF_INET6 if ":" in a else socket.AF_INET,
                    socket.SOCK_STREAM,
                    6,
                    "",
                    (a, int(port), 0, 0) if ":" in a else (a, int(port)),
                )
                for a in answers.get(host, [])
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return answers


@pytest.fixture(autouse=True)
def quick_connect(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing answers at ELSEWHERE: a proxy that tries them gives up quickly (502)."""
    monkeypatch.setattr(egress_server, "CONNECT_TIMEOUT_S", 1.0)


def blocked(events: list[dict[str, object]], host: str) -> list[dict[str, object]]:
    return [e for e in events if e.get("host") == host and e.get("decision") == "blocked"]


# -- refused through a wildcard
async def test_a_wildcard_never_reaches_the_hosts_own_addresses(
    box: Path, own_upstreams: list[EchoUpstream]
) -> None:
    rules = [f"**:{u.port}" for u in own_upstreams]
    async with serve_proxy(box, rules) as p:
        answers = {
            u.host: await tunnel(p.port, target(u.host, u.port), INNER) for u in own_upstreams
        }
    assert {host: status(a) for host, (a, _) in answers.items()} == {
        u.host: 403 for u in own_upstreams
    }
    assert all(u.received() == b"" for u in own_upstreams)
    for u in own_upstreams:
        [event] = blocked(p.events(), target(u.host, u.port))
        assert "local or private address" in str(event["reason"])
        assert event["rule"] == f"**:{u.port}"


async def test_a_wildcard_name_the_sandbox_resolves_to_this_host_is_refused(
    box: Path, own_upstreams: list[EchoUpstream], sandbox_dns: dict[str, list[str]]
) -> None:
    upstream = own_upstreams[0]
    name = f"own.{SANDBOX_DNS}"
    sandbox_dns[name] = [upstream.host]
    async with serve_proxy(box, [f"**.{SANDBOX_DNS}:{upstream.port}"]) as p:
        answer, _ = await tunnel(p.port, f"{name}:{upstream.port}", INNER)
    assert status(answer) == 403
    assert upstream.received() == b""
    assert sandbox_dns["_lookups"] == [name]  # resolved once, and nothing connected
    [event] = blocked(p.events(), f"{name}:{upstream.port}")
    assert "local or private address" in str(event["reason"])


@pytest.mark.parametrize("address", ELSEWHERE)
async def test_a_wildcard_never_reaches_private_shared_or_link_local_ranges(
    address: str, box: Path, sandbox_dns: dict[str, list[str]]
) -> None:
    name = f"private.{SANDBOX_DNS}"
    sandbox_dns[name] = [address]
    async with serve_proxy(box, ["**:443"]) as p:
        literal, _ = await tunnel(p.port, target(address, 443), b"")
        by_name, _ = await tunnel(p.port, f"{name}:443", b"")
    assert (status(literal), status(by_name)) == (403, 403)
    assert len(blocked(p.events(), target(address, 443))) == 1
    assert len(blocked(p.events(), f"{name}:443")) == 1
    assert not [e for e in p.events() if e["decision"] == "allowed"]


# -- still reached when named exactly
async def test_an_exact_address_grant_still_reaches_the_hosts_own_address(
    box: Path, own_upstreams: list[EchoUpstream]
) -> None:
    upstream = own_upstreams[0]
    exact = target(upstream.host, upstream.port)
    async with serve_proxy(box, [f"**:{upstream.port}"]) as p:  # the wildcard comes first
        before, _ = await tunnel(p.port, exact, INNER)
        egress.add_grant(box, egress.parse_rule(exact, "grant"))
        after, body = await tunnel(p.port, exact, INNER)
    assert (status(before), status(after), status(body)) == (403, 200, 200)
    assert upstream.requests[0][1] == b"/reached"
    assert [(e["decision"], e.get("rule")) for e in p.events()] == [
        ("blocked", f"**:{upstream.port}"),
        ("allowed", exact),
    ]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_the_platform_route_still_reaches_the_local_platform(
    host: str, box: Path, echo: EchoUpstream
) -> None:
    async with serve_proxy(box, [(f"{host}:{echo.port}", "platform"), "**"]) as p:
        answer, body = await tunnel(p.port, f"{host}:{echo.port}", INNER)
    assert (status(answer), status(body)) == (200, 200)
    assert echo.requests[0][1] == b"/reached"
    [event] = p.events()
    assert (event["decision"], event["source"]) == ("allowed", "platform")


# -- the parts: what is local, whose addresses these are
@pytest.mark.parametrize(
    ("address", "local"),
    [
        ("8.8.8.8", False),
        ("2606:4700::1111", False),
        ("::ffff:8.8.8.8", False),
        # not on any host or LAN, and what an intercepting resolver answers with
        ("203.0.113.80", False),
        ("198.18.0.7", False),
        ("10.1.2.3", True),
        ("100.64.0.1", True),
        ("172.16.5.4", True),
        ("192.168.1.1", True),
        ("169.254.169.254", True),
        ("0.1.2.3", True),
        ("127.8.8.8", True),
        ("224.0.0.1", True),
        ("239.255.255.250", True),
        ("255.255.255.255", True),
        ("fd00::1", True),
        ("fe80::1", True),
        ("::1", True),
        ("::ffff:10.0.0.1", True),
        ("2002:a00:1::", True),  # 6to4 carrying 10.0.0.1
        ("64:ff9b::7f00:1", True),  # NAT64 carrying 127.0.0.1
    ],
)
def test_what_counts_as_local(address: str, local: bool) -> None:
    assert egress.is_local(ipaddress.ip_address(address)) is local


def test_a_public_address_on_a_host_interface_is_refused_unless_named() -> None:
    own = [ipaddress.ip_interface("8.8.4.1/24")]  # as if this host had a public /24
    policy = egress.Policy([egress.parse_rule("**")], host_interfaces=lambda: own)
    wildcard = policy.admitting("8.8.4.9", 443)
    with pytest.raises(egress.EgressError, match="local or private"):
        policy.reachable(wildcard, ["8.8.4.9"])
    assert [a for a, _ in policy.reachable(wildcard, ["8.8.4.9", "1.1.1.1"])] == ["1.1.1.1"]
    named = [egress.parse_rule("8.8.4.9:443", "grant"), *wildcard]
    assert [(a, r.text) for a, r in policy.reachable(named, ["8.8.4.9"])] == [
        ("8.8.4.9", "8.8.4.9:443")
    ]


def test_when_the_host_addresses_cannot_be_listed_nothing_is_reached() -> None:
    from bandkit.proxies.egress import hostnet

    def broken() -> list[hostnet.Interface]:
        raise hostnet.HostNetError("no netlink here")

    policy = egress.Policy([egress.parse_rule("**")], host_interfaces=broken)
    with pytest.raises(egress.EgressError, match="cannot list this host's addresses"):
        policy.reachable(policy.admitting("example.com", 443), ["1.1.1.1"])


def test_the_kernel_lists_every_interface_address() -> None:
    from bandkit.proxies.egress import hostnet

    if not shutil.which("ip"):
        pytest.skip("no iproute2 to compare with")
    listing = subprocess.run(
        ["ip", "-j", "addr"], capture_output=True, text=True, check=True, timeout=10
    ).stdout
    expected = {
        ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}")
        for i in json.loads(listing)
        for a in i.get("addr_info", [])
    }
    assert set(hostnet.interfaces()) == expected
