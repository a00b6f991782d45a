"""The platform relay of a swarm sandbox on the local cluster: the only way from the
cluster's nodes to a platform that listens on this host's loopback (the emulator).

The local cluster's nodes live in network namespaces with no route to the host (`cluster`),
so a credential proxy service on a node cannot reach `127.0.0.1:PORT` of the host. The
relay is a host process whose listening sockets are made inside the hub namespace (on the
hub's own address, which every node routes to) while the process itself stays in the
host's, where it connects to the platform. It is an egress allowlist of exactly the
upstreams it was started with: a connection is relayed to the upstream its listening port
stands for, never anywhere a client names. A client from outside the cluster's subnet is
refused. Every decision is one line of the box's policy log (`egress.log.PolicyLog`:
`decision`, `host`, `source`, `rule`, `proxy_type` = `relay`).

Bytes pass through untouched: the credential proxy on the other side has already put the
key on the request, and it is this host's own platform on both ends of the hop.

Run as `python -P .../bandkit/runtimes/swarm/relay.py PORTS_FILE` (this file as a script,
with the repository on PYTHONPATH: not `-m`, which would import the runtime's package and
treble the start's CPU, once per sandbox) with the config as JSON on stdin:
`{"netns": "/run/netns/bkc-hub", "listen": "10.77.0.1", "clients":
"10.77.0.0/24", "sandbox": NAME, "log": POLICY_LOG, "upstreams": [["127.0.0.1", 8080,
LISTEN_PORT]]}` (a listening port of 0: any free one). It writes `{"ports": [...]}` (one
per upstream, same order) to PORTS_FILE, then relays until SIGTERM, until PORTS_FILE's
directory (its box) no longer exists, or until the namespace is gone (`cluster.down`
after a `kill -9` of the `kit.provision` that started it).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bandkit import processes
from bandkit.fsio import read_regular, write_private
from bandkit.proxies.egress.log import PolicyLog
from bandkit.proxies.wire import BUFFER, ClientSlots, copy, until_stopped

CLONE_NEWNET = 0x40000000
CONNECT_TIMEOUT_S = 10.0
MAX_CLIENTS = 512  # every agent of the box's proxy shares these


@dataclass(frozen=True)
class Upstream:
    host: str
    port: int
    listen_port: int = 0

    @property
    def origin(self) -> str:
        return f"{self.host}:{self.port}"


def _setns(fd: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


def listen_in(netns: Path, address: str, ports: Sequence[int]) -> list[socket.socket]:
    """Listening TCP sockets on `address:port` made inside network namespace `netns`; the
    calling thread is back in its own namespace when this returns (also on failure).
    Needs CAP_SYS_ADMIN; only for a single-threaded process or a thread of its own."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    target = os.open(netns, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    made: list[socket.socket] = []
    try:
        _setns(target)
        try:
            for port in ports:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                made.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind((address, port))
                sock.listen(128)
                sock.setblocking(False)
        finally:
            _setns(own)
    except BaseException:
        for sock in made:
            sock.close()
        raise
    finally:
        os.close(own)
        os.close(target)
    return made


async def _relay(
    upstream: Upstream,
    clients: ipaddress.IPv4Network,
    log: PolicyLog,
    slots: ClientSlots,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    source = str(writer.get_extra_info("peername", ("?", 0))[0])
    event = {"host": upstream.origin, "source": source, "proxy_type": "relay"}
    try:
        inside = ipaddress.ip_address(source) in clients
    except ValueError:
        inside = False
    if not inside or not slots.take():
        reason = "not from the cluster" if not inside else "too many connections"
        log.write(decision="block", rule="", reason=reason, **event)
        writer.close()
        return
    up_writer: asyncio.StreamWriter | None = None
    try:
        up_reader, upstream_writer = await asyncio.wait_for(
            asyncio.open_connection(upstream.host, upstream.port, limit=BUFFER),
            CONNECT_TIMEOUT_S,
        )
        up_writer = upstream_writer
        log.write(decision="allow", rule="platform", reason="", **event)
        await asyncio.gather(_one_way(reader, upstream_writer), _one_way(up_reader, writer))
    except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
        log.write(decision="error", rule="platform", reason=type(exc).__name__, **event)
    finally:
        slots.give()
        for w in (writer, up_writer):
            if w is not None:
                with contextlib.suppress(OSError):
                    w.close()


async def _one_way(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    """Copy until `src` ends, then pass the end on (half-close `dst`): a server that
    closes after a WebSocket close handshake is seen closing at once by the client, which
    otherwise waits its close timeout (10 s) for the end while the other way stays open."""
    await copy(src, dst)
    if dst.can_write_eof() and not dst.is_closing():
        with contextlib.suppress(OSError):
            dst.write_eof()


async def serve(
    socks: Sequence[socket.socket],
    upstreams: Sequence[Upstream],
    clients: ipaddress.IPv4Network,
    log: PolicyLog,
    ports_file: Path,
) -> None:
    slots = ClientSlots(MAX_CLIENTS)
    servers = [
        await asyncio.start_server(
            functools.partial(_relay, upstream, clients, log, slots), sock=sock, limit=BUFFER
        )
        for sock, upstream in zip(socks, upstreams, strict=True)
    ]
    ports = [int(sock.getsockname()[1]) for sock in socks]
    write_private(ports_file, json.dumps({"ports": ports}))
    try:
        await asyncio.Event().wait()
    finally:
        for server in servers:
            server.close()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -P relay.py PORTS_FILE < config\n")
        return 2
    try:
        config = json.loads(sys.stdin.read())
        upstreams = [Upstream(str(h), int(p), int(lp)) for h, p, lp in config["upstreams"]]
        clients = ipaddress.IPv4Network(str(config["clients"]))
        log = PolicyLog(Path(config["log"]), str(config["sandbox"]))
        socks = listen_in(
            Path(config["netns"]), str(config["listen"]), [u.listen_port for u in upstreams]
        )
    except (ValueError, KeyError, TypeError) as exc:
        sys.stderr.write(f"relay: malformed config ({type(exc).__name__})\n")
        return 2
    except OSError as exc:
        sys.stderr.write(f"relay: cannot listen in the cluster's hub: {exc.strerror}\n")
        return 1
    ports_file = Path(argv[0])
    serving = serve(socks, upstreams, clients, log, ports_file)
    stops = (signal.SIGTERM, signal.SIGINT)
    needs = (Path(config["netns"]),)  # `cluster.down` took the hub: nothing to relay for
    asyncio.run(until_stopped(serving, ports_file.parent, stops, needs=needs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))


# -- the host side: start, find and stop a box's relay

RELAY_SCRIPT = Path(__file__).resolve()
PORTS_NAME = "relay.json"
LOG_NAME = "relay.log"
START_TIMEOUT_S = 15.0


class RelayError(Exception):
    """The relay did not start; the message says where its log is."""


def tag(box: Path) -> str:
    return f"bandkit-swarm-relay:{box.resolve()}"


def running(box: Path) -> bool:
    return bool(processes.tagged_pids(tag(box)))


def stop(box: Path) -> None:
    processes.terminate_tagged(tag(box), grace_s=5)


def start(
    box: Path,
    *,
    sandbox: str,
    netns: Path,
    listen: str,
    clients: str,
    upstreams: Sequence[Upstream],
) -> list[int]:
    """Start the box's relay (after stopping one that runs); the port of each upstream.
    An upstream's `listen_port` (a restart's) is kept, 0 takes any free one."""
    stop(box)
    ports_file = box / PORTS_NAME
    ports_file.unlink(missing_ok=True)
    config = {
        "netns": str(netns),
        "listen": listen,
        "clients": clients,
        "sandbox": sandbox,
        "log": str(box / "policy.log"),
        "upstreams": [[u.host, u.port, u.listen_port] for u in upstreams],
    }
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    log_fd = os.open(box / LOG_NAME, flags, 0o600)
    code = str(Path(__file__).resolve().parents[3])
    with os.fdopen(log_fd, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-P", str(RELAY_SCRIPT), str(ports_file)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=log,
            env={"PYTHONPATH": code, "LANG": "C.UTF-8", processes.TAG_ENV: tag(box)},
            cwd="/",
            start_new_session=True,
        )
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write(json.dumps(config).encode())
        proc.stdin.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ports_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RelayError(f"the platform relay did not start; see {box / LOG_NAME}")
        time.sleep(0.02)
    return [int(p) for p in json.loads(read_regular(ports_file, what="relay ports")[0])["ports"]]
