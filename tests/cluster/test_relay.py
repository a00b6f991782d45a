"""The platform relay for real: its listening socket made inside another network
namespace while it connects out from the host's; it relays only to its upstream, refuses a
client outside its subnet, and logs each decision.

Marked `cluster` (root: it makes a network namespace of its own, `bkc-relay-test`).
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.cluster import network
from bandkit.cluster.layout import NETNS_DIR
from bandkit.runtimes.swarm import relay
from tests.support.wait import wait_for

pytestmark = pytest.mark.cluster
NETNS = "bkc-relay-test"


@pytest.fixture
def netns() -> Iterator[Path]:
    """A namespace of the test's own; /run/netns released after it if it made it."""
    had_dir = NETNS_DIR.exists()
    subprocess.run(["ip", "netns", "add", NETNS], check=True, timeout=30)
    subprocess.run(["ip", "-n", NETNS, "link", "set", "lo", "up"], check=True, timeout=30)
    try:
        yield Path("/run/netns") / NETNS
    finally:
        subprocess.run(["ip", "netns", "delete", NETNS], check=False, timeout=30)
        if not had_dir:
            network.release_netns_dir()
    assert NETNS_DIR.exists() == had_dir


@pytest.fixture
def upstream() -> Iterator[int]:
    """A host-side TCP server on 127.0.0.1 that answers `hello` with `upstream:hello`."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"upstream:" + conn.recv(100))

    threading.Thread(target=serve, daemon=True).start()
    yield int(server.getsockname()[1])
    server.close()


def _from_inside(port: int, *, then: str = "") -> subprocess.CompletedProcess[str]:
    probe = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
        "s.sendall(b'hello'); print(s.recv(100).decode())\n" + then
    )
    return subprocess.run(
        ["ip", "netns", "exec", NETNS, "python3", "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _start(box: Path, netns: Path, upstream: int) -> list[int]:
    """The box's relay to `upstream`, listening on loopback inside `netns`."""
    return relay.start(
        box,
        sandbox="my-agent",
        netns=netns,
        listen="127.0.0.1",
        clients="127.0.0.0/8",
        upstreams=[relay.Upstream("127.0.0.1", upstream)],
    )


def test_the_relay_listens_inside_and_reaches_only_its_upstream(
    netns: Path, upstream: int, tmp_path: Path
) -> None:
    box = tmp_path / "box"
    box.mkdir()
    (port,) = _start(box, netns, upstream)
    try:
        assert relay.running(box)
        done = _from_inside(port)
        assert done.stdout.strip() == "upstream:hello", done.stderr
        # the port is the namespace's, not the host's
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        (event,) = [json.loads(line) for line in (box / "policy.log").read_text().splitlines()]
        assert event["decision"] == "allow"
        assert event["host"] == f"127.0.0.1:{upstream}"
        assert event["proxy_type"] == "relay"
        # started again on the same port, for clients of another subnet only: refused
        relay.start(
            box,
            sandbox="my-agent",
            netns=netns,
            listen="127.0.0.1",
            clients="10.0.0.0/8",
            upstreams=[relay.Upstream("127.0.0.1", upstream, port)],
        )
        refused = _from_inside(port)
        assert "upstream:" not in refused.stdout
        last = json.loads((box / "policy.log").read_text().splitlines()[-1])
        assert (last["decision"], last["reason"]) == ("block", "not from the cluster")
    finally:
        relay.stop(box)
    assert not relay.running(box)


def test_the_upstream_closing_reaches_the_client_at_once(
    netns: Path, upstream: int, tmp_path: Path
) -> None:
    """The upstream closes after its answer while the client keeps its own side open (a
    WebSocket server after the close handshake): the client sees the end at once, not
    when it closes first (the WebSocket client's 10 s close timeout on every stop)."""
    box = tmp_path / "box"
    box.mkdir()
    (port,) = _start(box, netns, upstream)
    try:
        done = _from_inside(
            port, then="s.settimeout(3); print('end' if s.recv(1) == b'' else '?')\n"
        )
        assert done.stdout.split() == ["upstream:hello", "end"], done.stderr
    finally:
        relay.stop(box)


def test_the_relay_ends_when_its_namespace_is_deleted(
    netns: Path, upstream: int, tmp_path: Path
) -> None:
    """`kill -9` of a `kit.provision` leaves its relay and its box; `cluster.down` deletes
    the hub namespace, and the relay ends with it rather than outliving the cluster."""
    box = tmp_path / "box"
    box.mkdir()
    _start(box, netns, upstream)
    try:
        assert relay.running(box)
        subprocess.run(["ip", "netns", "delete", NETNS], check=True, timeout=30)
        wait_for(lambda: not relay.running(box), timeout=20, what="the relay to end")
        assert box.is_dir()  # it ended for the namespace, not for its box
    finally:
        relay.stop(box)
