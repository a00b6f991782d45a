"""Credential-proxy benchmark: the cost of the hardened proxy on one HTTP round trip.

An h11 echo upstream runs on 127.0.0.1 (asyncio, its own thread, answering each request
with its headers as JSON); the proxy runs as `boxnet.start_proxy` starts it for a box (its
own process, token URL, pinned upstream). The client sends sequential GETs with the
placeholder `X-API-Key` and reads each response with h11: `ROUNDS` straight to the
upstream and `ROUNDS` through the proxy, in interleaved blocks of the same run (one
keep-alive connection per block, warmed up first). The
figures are the p50 and p90 per round trip and the proxy's p50 overhead, against the
budget of `BUDGET_MS` (the hardening may add at most that to an agent's echo).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import h11

from bandkit import processes
from bandkit.bench import sized
from bandkit.runtimes import boxnet

ROUNDS = 200
BLOCKS = 4
WARMUP = 10
BUDGET_MS = 2.0
PLACEHOLDER = "proxy-managed"
KEY = "bench-agent-key-not-a-real-one-0123456789abcdef"


class _Upstream:
    """An h11 echo server on 127.0.0.1 in a daemon thread."""

    def __init__(self) -> None:
        self.port = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._run, daemon=True).start()
        if not self._ready.wait(10):
            raise RuntimeError("bench echo upstream did not start")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = h11.Connection(h11.SERVER)
        headers: list[tuple[bytes, bytes]] = []
        try:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await reader.read(65536))
                elif isinstance(event, h11.Request):
                    headers = list(event.headers)
                elif isinstance(event, h11.EndOfMessage):
                    body = json.dumps([[n.decode(), v.decode()] for n, v in headers]).encode()
                    length = str(len(body)).encode()
                    response = h11.Response(
                        status_code=200,
                        headers=[
                            (b"content-type", b"application/json"),
                            (b"content-length", length),
                        ],
                    )
                    writer.write(
                        (conn.send(response) or b"")
                        + (conn.send(h11.Data(data=body)) or b"")
                        + (conn.send(h11.EndOfMessage()) or b"")
                    )
                    await writer.drain()
                    conn.start_next_cycle()
                elif not isinstance(event, h11.Data):
                    break
        except (h11.ProtocolError, ConnectionError):
            pass
        finally:
            writer.close()


def _round_trips(port: int, prefix: str, rounds: int) -> list[float]:
    """Seconds per GET on one new keep-alive connection (after `WARMUP` untimed ones)."""
    times: list[float] = []
    warmup = sized(WARMUP, 2)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = h11.Connection(h11.CLIENT)
        headers = [("Host", "127.0.0.1"), ("X-API-Key", PLACEHOLDER), ("User-Agent", "bench")]
        for index in range(warmup + rounds):
            start = time.perf_counter()
            request = h11.Request(method="GET", target=f"{prefix}/api/v1/agent/me", headers=headers)
            sock.sendall((conn.send(request) or b"") + (conn.send(h11.EndOfMessage()) or b""))
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(sock.recv(65536))
                elif isinstance(event, h11.Response) and event.status_code != 200:
                    raise RuntimeError(f"bench GET answered {event.status_code}")
                elif isinstance(event, h11.EndOfMessage):
                    break
            if index >= warmup:
                times.append(time.perf_counter() - start)
            conn.start_next_cycle()
    return times


def _p(times: list[float], q: int) -> float:
    return statistics.quantiles(times, n=100)[q - 1] * 1000


def run() -> list[str]:
    root = Path(tempfile.mkdtemp(prefix="bench-proxy-", dir="/tmp"))
    upstream = _Upstream()
    try:
        env = {"BAND_REST_URL": f"http://127.0.0.1:{upstream.port}"}
        injection = boxnet.Injection(boxnet.band_key_scopes(env["BAND_REST_URL"]), PLACEHOLDER, KEY)
        start = time.perf_counter()
        urls = boxnet.start_proxy(root, None, env, [injection])
        started = time.perf_counter() - start
        parts = urlsplit(urls["BAND_REST_URL"])
        direct: list[float] = []
        proxied: list[float] = []
        rounds, blocks = sized(ROUNDS, 8), sized(BLOCKS, 2)
        for _ in range(blocks):  # interleaved, so a noisy moment hits both alike
            direct += _round_trips(upstream.port, "", rounds // blocks)
            proxied += _round_trips(parts.port or 0, parts.path, rounds // blocks)
    finally:
        processes.terminate_tagged(boxnet.proxy_tag(root), grace_s=5)
        upstream.stop()
        shutil.rmtree(root, ignore_errors=True)
    d50, p50 = _p(direct, 50), _p(proxied, 50)
    verdict = "within" if p50 - d50 <= BUDGET_MS else "OVER"
    return [
        f"credential proxy: start (process up, ports file written) {started * 1000:.0f} ms",
        f"credential proxy: echo GET p50 direct {d50:.2f} ms (p90 {_p(direct, 90):.2f}), "
        f"through the hardened proxy {p50:.2f} ms (p90 {_p(proxied, 90):.2f}); "
        f"+{p50 - d50:.2f} ms p50, {verdict} the {BUDGET_MS:g} ms budget "
        f"({len(direct)} sequential keep-alive GETs each way, h11 echo upstream on 127.0.0.1)",
    ]
