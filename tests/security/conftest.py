"""Fixtures for the credential-proxy tests (test_proxy_*.py): an h11 echo upstream on
127.0.0.1 that records every byte it receives, credential proxies started the way a
runtime starts them, and a raw loopback client that sends whatever bytes a test gives."""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import h11
import pytest

from bandkit import processes
from bandkit.runtimes import boxnet
from tests.support.wait import wait_for

CANARY = "canary-key-5f0c1a9e7d3b42c8a6e1f09b3d7c5a21"  # the agent key of box A
CANARY_B = "canary-key-b-0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b"  # box B's
PLACEHOLDER = "proxy-managed"
WAIT_S = 10.0


class EchoUpstream:
    """An HTTP/1.1 server (h11) on 127.0.0.1 in its own thread.

    Every request is answered 200 with each request header echoed back as an
    `x-echo-<name>` response header and, as JSON, in the body. A WebSocket upgrade gets
    101, then the server sends `sent:<its x-api-key>` and echoes raw bytes; with
    `split_after` set, the key goes out in two writes `split_after` seconds apart (the
    first `SPLIT_AT` bytes, then the rest), and with `close_after_half` the connection
    ends after the first; with `ws_script` it sends those (delay, bytes) instead, then
    echoes. `raw` is every byte received on every connection, `requests` every parsed
    request, in order.
    """

    SPLIT_AT = 20

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.raw = bytearray()
        self.requests: list[tuple[bytes, bytes, list[tuple[bytes, bytes]], bytes]] = []
        self.connections = 0
        self.chunked_body: list[bytes] = []  # when set: answer with these chunks instead
        self.split_after: float | None = None
        self.close_after_half = False
        self.ws_script: list[tuple[float, bytes]] = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def __enter__(self) -> EchoUpstream:
        self._thread.start()
        if not self._ready.wait(WAIT_S):
            raise AssertionError("the echo upstream did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(WAIT_S)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def reset(self) -> None:
        with self._lock:
            self.raw.clear()
            self.requests.clear()
            self.connections = 0
            self.chunked_body = []
            self.split_after = None
            self.close_after_half = False
            self.ws_script = []

    def received(self) -> bytes:
        with self._lock:
            return bytes(self.raw)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            server = await asyncio.start_server(self._handle, self.host, 0)
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    async def _read(self, reader: asyncio.StreamReader) -> bytes:
        data = await reader.read(65536)
        with self._lock:
            self.raw += data
        return data

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._lock:
            self.connections += 1
        conn = h11.Connection(h11.SERVER)
        request: h11.Request | None = None
        body = b""
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await self._read(reader))
                elif isinstance(event, h11.Request):
                    request, body = event, b""
                elif isinstance(event, h11.Data):
                    body += event.data
                elif isinstance(event, h11.EndOfMessage) and request is not None:
                    headers = list(request.headers)
                    with self._lock:
                        self.requests.append((request.method, request.target, headers, body))
                    if any(n == b"upgrade" for n, _ in headers):
                        await self._websocket(conn, headers, reader, writer)
                        return
                    writer.write(self._response(conn, headers, body))
                    await writer.drain()
                    if conn.our_state is not h11.DONE:
                        break
                    conn.start_next_cycle()
                else:
                    break
        except (h11.ProtocolError, ConnectionError):
            pass
        finally:
            writer.close()

    def _response(
        self, conn: h11.Connection, headers: list[tuple[bytes, bytes]], body: bytes
    ) -> bytes:
        echoed = [(b"x-echo-" + n, v) for n, v in headers]
        if self.chunked_body:
            out = conn.send(h11.Response(status_code=200, headers=echoed)) or b""
            for piece in self.chunked_body:
                out += conn.send(h11.Data(data=piece)) or b""
            return out + (conn.send(h11.EndOfMessage()) or b"")
        payload = json.dumps(
            {"headers": [[n.decode(), v.decode()] for n, v in headers], "body": body.decode()}
        ).encode()
        response = h11.Response(
            status_code=200,
            headers=[
                *echoed,
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        )
        return (
            (conn.send(response) or b"")
            + (conn.send(h11.Data(data=payload)) or b"")
            + (conn.send(h11.EndOfMessage()) or b"")
        )

    async def _websocket(
        self,
        conn: h11.Connection,
        headers: list[tuple[bytes, bytes]],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        key = dict(headers).get(b"x-api-key", b"")
        switch = h11.InformationalResponse(
            status_code=101, headers=[(b"upgrade", b"websocket"), (b"connection", b"Upgrade")]
        )
        if self.ws_script:
            writer.write(conn.send(switch) or b"")
            for delay, data in self.ws_script:
                await asyncio.sleep(delay)
                writer.write(data)
                await writer.drain()
        elif self.split_after is None:
            writer.write((conn.send(switch) or b"") + b"sent:" + key + b"\n")
            await writer.drain()
        else:  # the key in two writes, far apart (or the stream ends in the middle)
            writer.write((conn.send(switch) or b"") + b"sent:" + key[: self.SPLIT_AT])
            await writer.drain()
            if self.close_after_half:
                return
            await asyncio.sleep(self.split_after)
            writer.write(key[self.SPLIT_AT :] + b"\n")
            await writer.drain()
        rest = conn.trailing_data[0]
        if rest:
            writer.write(rest)
        while data := await self._read(reader):
            writer.write(data)
            await writer.drain()


@dataclass
class Box:
    """A credential proxy as a runtime starts it: its root, the env it returned."""

    root: Path
    urls: dict[str, str]
    key: str
    tokens: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return urlsplit(self.urls["BAND_REST_URL"]).port or 0

    @property
    def token(self) -> str:
        return urlsplit(self.urls["BAND_REST_URL"]).path.strip("/").split("/")[0]

    def pids(self) -> list[int]:
        return processes.tagged_pids(boxnet.proxy_tag(self.root))

    def stop(self) -> None:
        processes.terminate_tagged(boxnet.proxy_tag(self.root), grace_s=5)


def pinned_env(upstream: EchoUpstream) -> dict[str, str]:
    return {
        "BAND_REST_URL": upstream.url,
        "BAND_WS_URL": f"ws://127.0.0.1:{upstream.port}/api/v1/socket/websocket",
    }


def start_box(
    root: Path,
    env: dict[str, str],
    key: str = CANARY,
    workspace: Path | None = None,
    scopes: tuple[str, ...] | None = None,
) -> Box:
    """A box's proxy with an agent key scoped as provisioning scopes it (the platform
    `env` names; none when it names none) unless `scopes` says otherwise."""
    root.mkdir(parents=True, exist_ok=True)
    if scopes is None:
        rest, ws = env.get("BAND_REST_URL"), env.get("BAND_WS_URL", "")
        scopes = boxnet.band_key_scopes(rest, ws) if rest else ()
    injection = boxnet.Injection(scopes, PLACEHOLDER, key)
    urls = boxnet.start_proxy(root, workspace or root, env, [injection])
    return Box(root, urls, key)


@dataclass
class RawProxy:
    """A `keyproxy` process started directly with a config a test chose (its limits)."""

    proc: subprocess.Popen[bytes]
    ports: list[int]
    token: str

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(WAIT_S)


def run_keyproxy(tmp: Path, upstream: EchoUpstream, **extra: object) -> RawProxy:
    """The credential proxy for one agent-API route to `upstream`, `extra` added to its
    config (e.g. `head_timeout_s`, `max_clients`)."""
    token = secrets.token_urlsafe(32)
    route = {
        "upstream": upstream.url,
        "paths": ["/api/v1/agent"],
        "swaps": [[PLACEHOLDER, CANARY, ["/api/v1/agent"]]],
    }
    ports_file = tmp / "ports.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "bandkit.proxies.keyproxy", str(ports_file)],
        stdin=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"token": token, "routes": [route], **extra}).encode())
    proc.stdin.close()
    wait_for(ports_file.exists, timeout=WAIT_S, what="the proxy's ports file")
    return RawProxy(proc, json.loads(ports_file.read_text())["ports"], token)


def exchange(port: int, data: bytes, *, timeout: float = WAIT_S) -> bytes:
    """Send `data` on a fresh loopback connection; everything received until the proxy
    closes it (the deadline failing the test when it never does)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def status(response: bytes) -> int:
    line = response.split(b"\r\n", 1)[0].split(b" ")
    return int(line[1]) if len(line) > 1 and line[1].isdigit() else 0


@pytest.fixture(scope="module")
def echo_upstream() -> Iterator[EchoUpstream]:
    with EchoUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def box_a(echo_upstream: EchoUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    started = start_box(tmp_path_factory.mktemp("box-a"), pinned_env(echo_upstream))
    yield started
    started.stop()


@pytest.fixture(scope="module")
def box_b(echo_upstream: EchoUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Box]:
    started = start_box(tmp_path_factory.mktemp("box-b"), pinned_env(echo_upstream), key=CANARY_B)
    yield started
    started.stop()


@pytest.fixture
def echo(echo_upstream: EchoUpstream) -> EchoUpstream:
    """The module's echo upstream with nothing received yet."""
    echo_upstream.reset()
    return echo_upstream
