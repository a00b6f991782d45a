"""The docker sandbox's egress proxy on its own (no Docker): CONNECT and plain-HTTP
requests allowed or blocked by rule, malformed heads answered 400, every decision in the
policy log, wildcards never opening the host's loopback, grants taking effect while it
runs, strangers refused, and the proxy process started, restarted and orphaned like a
runtime does it. All traffic stays on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.kit import policy
from bandkit.manifest import Manifest
from bandkit.proxies import egress
from tests.security.conftest import EchoUpstream
from tests.security.support import (
    Sandbox,
    closed_port,
    egress_proxy,
    exchange,
    get,
    hostile_sandbox,
    status,
    tunnel,
)

WAIT_S = 10.0
CANARY = "canary-egress-proxy-auth-3c9e1f"


@pytest.fixture
def box(tmp_path: Path) -> Path:
    path = tmp_path / "box"
    path.mkdir(mode=0o700)
    return path


# -- CONNECT
async def test_connect_to_an_allowed_target_tunnels_and_is_logged(
    box: Path, echo: EchoUpstream
) -> None:
    target = f"127.0.0.1:{echo.port}"
    async with egress_proxy(box, [target]) as p:
        answer, inner = await tunnel(
            p.port, target, b"GET /through HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert status(inner) == 200
    assert echo.requests[0][1] == b"/through"
    [event] = p.events()
    assert event["decision"] == "allowed"
    assert (event["host"], event["proxy_type"], event["rule"]) == (target, "connect", target)
    assert event["sandbox"] == "box-1"


async def test_connect_to_a_target_no_rule_admits_is_blocked_and_logged(
    box: Path, echo: EchoUpstream
) -> None:
    async with egress_proxy(box, [f"127.0.0.1:{closed_port()}"]) as p:
        answer, _ = await tunnel(p.port, f"127.0.0.1:{echo.port}", b"never sent")
    assert status(answer) == 403
    assert b"blocked by egress policy" in answer
    assert echo.received() == b""
    [event] = p.events()
    assert event["decision"] == "blocked"
    assert event["host"] == f"127.0.0.1:{echo.port}"
    assert event["proxy_type"] == "connect"
    assert event["reason"] == "no rule admits this host"


# -- plain HTTP
async def test_plain_http_allowed_is_forwarded_in_origin_form_without_proxy_headers(
    box: Path, echo: EchoUpstream
) -> None:
    target = f"127.0.0.1:{echo.port}"
    request = get(
        f"http://{target}/path?q=1", f"Proxy-Authorization: Basic {CANARY}", "X-Kept: yes"
    )
    async with egress_proxy(box, [target]) as p:
        answer = await exchange(p.port, request)
    assert status(answer) == 200
    method, path, headers, _ = echo.requests[0]
    seen = dict(headers)
    assert (method, path) == (b"GET", b"/path?q=1")
    assert seen[b"host"] == target.encode()
    assert seen[b"connection"] == b"close"
    assert seen[b"x-kept"] == b"yes"
    assert b"proxy-authorization" not in seen
    [event] = p.events()
    assert (event["decision"], event["proxy_type"], event["host"]) == ("allowed", "http", target)
    assert CANARY not in (box / egress.LOG_NAME).read_text()  # header values are never logged


async def test_plain_http_blocked_never_reaches_the_target(box: Path, echo: EchoUpstream) -> None:
    async with egress_proxy(box, ["pypi.org"]) as p:
        answer = await exchange(p.port, get(f"http://127.0.0.1:{echo.port}/"))
    assert status(answer) == 403
    assert echo.received() == b""
    [event] = p.events()
    assert (event["decision"], event["proxy_type"]) == ("blocked", "http")


MALFORMED = [
    pytest.param(b"garbage\r\n\r\n", id="not-http"),
    pytest.param(b"GET /origin-form HTTP/1.1\r\nHost: x\r\n\r\n", id="origin-form"),
    pytest.param(b"CONNECT 127.0.0.1 HTTP/1.1\r\nHost: x\r\n\r\n", id="connect-no-port"),
    pytest.param(b"CONNECT 127.0.0.1:99999 HTTP/1.1\r\nHost: x\r\n\r\n", id="connect-bad-port"),
    pytest.param(b"CONNECT ../..:443 HTTP/1.1\r\nHost: x\r\n\r\n", id="connect-bad-host"),
    pytest.param(b"GET https://{t}/ HTTP/1.1\r\nHost: x\r\n\r\n", id="https-absolute"),
    pytest.param(b"GET http://u:p@{t}/ HTTP/1.1\r\nHost: x\r\n\r\n", id="userinfo"),
    pytest.param(b"GET http://{t}/ HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n\r\n", id="bad-header"),
    pytest.param(b"GET http://{t}/ HTTP/1.1\r\n\r\n", id="no-host-header"),
    pytest.param(b"GET http://{t}/ HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n", id="huge"),
]


@pytest.mark.parametrize("raw", MALFORMED)
async def test_malformed_requests_are_400_and_logged(
    raw: bytes, box: Path, echo: EchoUpstream
) -> None:
    target = f"127.0.0.1:{echo.port}"
    async with egress_proxy(box, [target, "**"]) as p:
        answer = await exchange(p.port, raw.replace(b"{t}", target.encode()))
    assert status(answer) == 400
    assert echo.received() == b""
    [event] = p.events()
    assert (event["decision"], event["reason"]) == ("blocked", "malformed request")


# -- local addresses, grants, strangers
@pytest.mark.parametrize("rule", ["**:{port}", "localhost:{port}", "*.0.0.1:{port}"])
async def test_a_wildcard_or_a_name_never_opens_the_hosts_loopback(
    rule: str, box: Path, echo: EchoUpstream
) -> None:
    text = rule.format(port=echo.port)
    try:
        rules = [text] if egress.parse_rule(text) else []
    except egress.EgressError:
        rules = []  # refused as a rule already: fine too
    async with egress_proxy(box, rules) as p:
        answer, _ = await tunnel(p.port, f"127.0.0.1:{echo.port}", b"")
        by_name, _ = await tunnel(p.port, f"localhost:{echo.port}", b"")
    assert status(answer) == 403
    assert status(by_name) == 403
    assert echo.received() == b""
    assert all(e["decision"] == "blocked" for e in p.events())


async def test_a_grant_takes_effect_while_the_proxy_runs(box: Path, echo: EchoUpstream) -> None:
    target = f"127.0.0.1:{echo.port}"
    inner = b"GET /granted HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    async with egress_proxy(box, []) as p:
        before, _ = await tunnel(p.port, target, inner)
        egress.add_grant(box, egress.parse_rule(target, "grant"))
        after, body = await tunnel(p.port, target, inner)
        egress.remove_grant(box, target)
        again, _ = await tunnel(p.port, target, inner)
    assert [status(before), status(after), status(again)] == [403, 200, 403]
    assert status(body) == 200
    decisions = [(e["decision"], e.get("source", "")) for e in p.events()]
    assert decisions == [("blocked", ""), ("allowed", "grant"), ("blocked", "")]


async def test_a_client_outside_the_sandbox_network_gets_nothing(
    box: Path, echo: EchoUpstream
) -> None:
    target = f"127.0.0.1:{echo.port}"
    async with egress_proxy(box, [target], clients="10.213.0.0/16") as p:
        answer = await exchange(p.port, get(f"http://{target}/"))
    assert answer == b""
    assert echo.received() == b""
    [event] = p.events()
    assert event["reason"] == "client outside the sandbox network"


async def test_an_unreachable_allowed_target_is_502(box: Path) -> None:
    target = f"127.0.0.1:{closed_port()}"
    async with egress_proxy(box, [target]) as p:
        answer, _ = await tunnel(p.port, target, b"")
    assert status(answer) == 502
    [event] = p.events()
    assert (event["decision"], event["reason"]) == ("allowed", "upstream failed")


# -- rules, log summary
@pytest.mark.parametrize(
    ("rule", "host", "port", "ok"),
    [
        ("pypi.org", "pypi.org", 443, True),
        ("pypi.org", "pypi.org", 80, True),
        ("pypi.org", "pypi.org", 8080, False),
        ("pypi.org:8080", "pypi.org", 8080, True),
        ("PyPI.org.", "pypi.org", 443, True),
        ("*.band.ai", "app.band.ai", 443, True),
        ("*.band.ai", "a.b.band.ai", 443, False),
        ("*.band.ai", "band.ai", 443, False),
        ("**.band.ai", "a.b.band.ai", 443, True),
        ("**.band.ai", "band.ai", 443, True),
        ("**.band.ai", "evilband.ai", 443, False),
        ("**", "anything.example", 443, True),
        ("127.0.0.1:9", "127.0.0.1", 9, True),
        ("[::1]:9", "::1", 9, True),
    ],
)
def test_rule_patterns(rule: str, host: str, port: int, ok: bool) -> None:
    assert egress.parse_rule(rule).admits(host, port) is ok


@pytest.mark.parametrize(
    "bad", ["", "a b", "../..", "host:0", "host:65536", "host:x", "*.1.2.3.4", "::1", "h/p"]
)
def test_malformed_rules_are_refused(bad: str) -> None:
    with pytest.raises(egress.EgressError, match="invalid egress rule"):
        egress.parse_rule(bad)


def test_the_kit_allowlist_is_read_from_the_kit_spec() -> None:
    import yaml

    from bandkit.image.facts import SPEC, SPEC_LEGACY

    spec = yaml.safe_load(SPEC.read_text())
    assert egress.kit_allowlist() == tuple(spec["permissions"]["network"]["allow"])
    legacy = yaml.safe_load(SPEC_LEGACY.read_text())["caps"]["network"]["allow"]
    assert egress.kit_allowlist(SPEC_LEGACY) == tuple(legacy) == egress.kit_allowlist()
    assert all(egress.parse_rule(h) for h in egress.kit_allowlist())


def test_summary_has_sbx_policy_log_shape_and_the_table_is_printable() -> None:
    events = [
        {"decision": "blocked", "host": "evil.example:443", "proxy_type": "connect", "time": "1"},
        {"decision": "blocked", "host": "evil.example:443", "proxy_type": "connect", "time": "2"},
        {"decision": "allowed", "host": "pypi.org:443", "rule": "pypi.org", "time": "3"},
        {"decision": "blocked", "host": "\x1b[31mx", "proxy_type": "http", "time": "4"},
    ]
    summary = egress.summarize(events)
    assert [r["host"] for r in summary["blocked_hosts"]] == ["evil.example:443", "\x1b[31mx"]
    assert summary["blocked_hosts"][0]["count_since"] == 2
    assert summary["blocked_hosts"][0]["last_seen"] == "2"
    assert summary["allowed_hosts"][0]["rule"] == "pypi.org"
    table = egress.render(summary)
    assert table.splitlines()[0].split()[:3] == ["DECISION", "HOST", "RULE"]
    assert "\x1b" not in table


# -- as a process, the way the runtime runs it
def test_the_proxy_process_starts_restarts_on_its_port_and_exits_with_its_box(
    box: Path,
) -> None:
    rule = egress.parse_rule("pypi.org", "kit")
    port = egress.start(
        box, sandbox="box-1", listen="127.0.0.1", clients="127.0.0.0/8", rules=[rule]
    )
    try:
        assert egress.running(box)
        assert oct((box / egress.CONFIG_NAME).stat().st_mode & 0o777) == "0o600"
        egress.stop(box)
        assert not egress.running(box)
        assert egress.restart(box) == port  # the container's proxy variables name this port
        assert egress.restart(box) == port  # already running: a no-op
        shutil.rmtree(box)
        deadline = time.monotonic() + WAIT_S
        while egress.running(box):
            assert time.monotonic() < deadline, "the proxy outlived its box"
            time.sleep(0.05)
    finally:
        egress.stop(box)


# -- a real container behind it (Docker)
FETCH = (
    "import sys, urllib.request, urllib.error\n"
    "try:\n"
    "    r = urllib.request.urlopen(sys.argv[1], timeout=30)\n"
    "    print(r.status, r.read().decode()[:200])\n"
    "except urllib.error.HTTPError as e:\n"
    "    print(e.code, e.read().decode()[:200])\n"
)


@pytest.fixture(scope="module")
def docker_sandbox(kit_image: str) -> Iterator[Sandbox]:
    with hostile_sandbox(kit_image, "sec-egress-") as box:
        yield box


def fetch(box: Sandbox, url: str) -> tuple[int, str]:
    result = box.runtime.exec(box.name, ["/opt/band/venv/bin/python", "-c", FETCH, url])
    assert result.returncode == 0, result.stderr[-2000:]
    code, _, body = result.stdout.strip().partition(" ")
    return int(code), body


def policy_log_task(box: Sandbox, *extra: str) -> str:
    argv = ["invoke", "kit.policy-log", "--name", box.name, "--run-dir", str(box.run_dir)]
    result = subprocess.run(
        [*argv, *extra], capture_output=True, text=True, check=False, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def elsewhere() -> Iterator[EchoUpstream]:
    """An upstream on 127.0.0.2: a host the container reaches only through its egress proxy
    (its NO_PROXY keeps its own loopback, 127.0.0.1, local)."""
    with EchoUpstream(host="127.0.0.2") as server:
        yield server


@pytest.mark.docker
def test_a_container_is_blocked_until_kit_allow_grants_the_host(
    docker_sandbox: Sandbox, elsewhere: EchoUpstream
) -> None:
    box, echo = docker_sandbox, elsewhere
    target = f"127.0.0.2:{echo.port}"
    url = f"http://{target}/from-the-sandbox"

    code, body = fetch(box, url)
    assert code == 403, body
    assert "blocked by egress policy" in body
    assert echo.received() == b""
    blocked = [e for e in box.runtime.policy_log(box.name) if e.get("host") == target]
    assert [(e["decision"], e["proxy_type"]) for e in blocked] == [("blocked", "http")]

    granted = policy.allow(name=box.name, host=target, run_dir=box.run_dir)
    assert granted == target
    with Manifest.open(box.manifest) as manifest:
        assert any(r.details.get("host") == target for r in manifest.resources)

    code, body = fetch(box, url)
    assert code == 200, body
    assert echo.requests[0][1] == b"/from-the-sandbox"
    seen = [e for e in box.runtime.policy_log(box.name) if e.get("host") == target]
    assert [(e["decision"], e.get("source")) for e in seen] == [
        ("blocked", None),
        ("allowed", "grant"),
    ]

    table = policy_log_task(box)
    assert any(line.split()[:2] == ["blocked", target] for line in table.splitlines())
    assert any(line.split()[:3] == ["allowed", target, target] for line in table.splitlines())
    summary = json.loads(policy_log_task(box, "--json"))
    assert {r["host"] for r in summary["allowed_hosts"]} >= {target}
    assert box.key not in table + json.dumps(summary)


@pytest.mark.docker
def test_a_container_has_no_way_out_but_the_proxy(docker_sandbox: Sandbox) -> None:
    """The egress proxy (on the network's gateway) is reachable; a client that ignores the
    proxy variables cannot even resolve a name (the internal network has no DNS way out)."""
    box = docker_sandbox
    probe = (
        "import os, socket\n"
        "proxy = os.environ['HTTPS_PROXY'].rsplit('/', 1)[-1]\n"
        "host, port = proxy.rsplit(':', 1)\n"
        "socket.create_connection((host, int(port)), timeout=5).close()\n"
        "try:\n"
        "    socket.getaddrinfo('pypi.org', 443)\n"
        "    print('resolved')\n"
        "except OSError:\n"
        "    print('no-dns')\n"
    )
    result = box.runtime.exec(box.name, ["/opt/band/venv/bin/python", "-c", probe])
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "no-dns"
