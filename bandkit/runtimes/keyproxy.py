"""The host-side credential proxy: the sandbox sends the placeholder, the proxy the key.

Docker Sandboxes keep a real key on the host and swap the sandbox's placeholder for it in
the request headers of matching hosts. Runtimes that have no such proxy (local host
processes, the sbx simulator) run this one: a loopback reverse proxy per upstream origin.
The agent is pointed at `http://127.0.0.1:<port>` (BAND_REST_URL / BAND_WS_URL) and holds
only the placeholder. Each client connection gets its own upstream connection; the proxy
reads every request head in turn, replaces the placeholder in header values (never the
request line or body), rewrites `Host`, forwards the body by its framing
(Content-Length or chunked), and pipes responses back untouched. Keep-alive works; after
a WebSocket upgrade the connection is piped raw both ways.

Run as `python -m bandkit.runtimes.keyproxy PORTS_FILE` with the routes as JSON on stdin:
`{"routes": [{"upstream": "http://127.0.0.1:8080", "swaps": [["proxy-managed", "<key>"]]}]}`.
It writes `{"ports": [...]}` (one per route, same order) to PORTS_FILE atomically, then
serves until SIGTERM, or until PORTS_FILE's directory (its box) no longer exists.
Values never reach argv, the ports file or a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import signal
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

HEAD_LIMIT = 64 * 1024
ORPHAN_CHECK_S = 2.0


@dataclass(frozen=True)
class Route:
    host: str
    port: int
    tls: bool
    swaps: tuple[tuple[bytes, bytes], ...]
    ca_pem: str = ""  # trusted in addition to the system roots (a TLS platform's own CA)


def parse_routes(config: dict[str, object]) -> list[Route]:
    routes: list[Route] = []
    for raw in config.get("routes", []):  # type: ignore[attr-defined]
        parts = urlsplit(raw["upstream"])
        tls = parts.scheme in ("https", "wss")
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if tls else 80)
        swaps = tuple((p.encode(), v.encode()) for p, v in raw["swaps"] if p and v)
        routes.append(Route(host, port, tls, swaps, str(raw.get("ca_pem") or "")))
    return routes


def rewrite_head(head: bytes, route: Route) -> bytes:
    """Swap placeholders in header values and point `Host` at the upstream."""
    lines = head.split(b"\r\n")
    out = [lines[0]]
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(b":")
        if name.strip().lower() == b"host":
            continue
        for placeholder, real in route.swaps:
            value = value.replace(placeholder, real)
        out.append(name + sep + value)
    default_port = 443 if route.tls else 80
    host = route.host if route.port == default_port else f"{route.host}:{route.port}"
    out.insert(1, b"Host: " + host.encode())
    return b"\r\n".join(out) + b"\r\n\r\n"


def framing(head: bytes) -> tuple[bool, int, bool]:
    """(upgrade, content length, chunked) of a request head."""
    upgrade, length, chunked = False, 0, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        lname, lvalue = name.strip().lower(), value.strip().lower()
        if lname == b"upgrade":
            upgrade = True
        elif lname == b"content-length":
            length = int(lvalue)
        elif lname == b"transfer-encoding" and b"chunked" in lvalue:
            chunked = True
    return upgrade, length, chunked


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def _copy_chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        size_line = await reader.readuntil(b"\r\n")
        writer.write(size_line)
        size = int(size_line.split(b";")[0].strip(), 16)
        if size == 0:
            while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                writer.write(trailer)
            writer.write(b"\r\n")
            return
        writer.write(await reader.readexactly(size + 2))


async def handle(
    route: Route, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
) -> None:
    """One client connection <-> one upstream connection; request heads rewritten in turn,
    responses piped back as they are (keep-alive and WebSocket upgrades both work)."""
    context = ssl.create_default_context() if route.tls else None
    if context is not None and route.ca_pem:
        context.load_verify_locations(cadata=route.ca_pem)
    try:
        up_r, up_w = await asyncio.open_connection(
            route.host, route.port, ssl=context, server_hostname=route.host if context else None
        )
    except OSError:
        client_w.write(
            b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        client_w.close()
        return
    responses = asyncio.create_task(_pipe(up_r, client_w))
    try:
        while True:
            head = await client_r.readuntil(b"\r\n\r\n")
            up_w.write(rewrite_head(head, route))
            upgrade, length, chunked = framing(head)
            if upgrade:
                await _pipe(client_r, up_w)  # a WebSocket: raw bytes from here on
                break
            if chunked:
                await _copy_chunked(client_r, up_w)
            elif length:
                up_w.write(await client_r.readexactly(length))
            await up_w.drain()
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
        pass
    finally:
        with contextlib.suppress(Exception):
            up_w.close()
        await responses


async def serve(routes: list[Route], ports_file: Path) -> None:
    servers = []
    for route in routes:
        server = await asyncio.start_server(
            functools.partial(handle, route), "127.0.0.1", 0, limit=HEAD_LIMIT
        )
        servers.append(server)
    ports = [s.sockets[0].getsockname()[1] for s in servers]
    tmp = ports_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"ports": ports}), encoding="utf-8")
    os.replace(tmp, ports_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    orphan_check = asyncio.create_task(_stop_when_removed(ports_file, stop))
    await stop.wait()
    orphan_check.cancel()
    for server in servers:
        server.close()


async def _stop_when_removed(ports_file: Path, stop: asyncio.Event) -> None:
    """A safety net against leaks: the proxy belongs to its box directory; once that
    directory is gone (the sandbox was removed without stopping us), exit."""
    while ports_file.parent.exists():
        await asyncio.sleep(ORPHAN_CHECK_S)
    stop.set()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m bandkit.runtimes.keyproxy PORTS_FILE < routes.json\n")
        return 2
    routes = parse_routes(json.loads(sys.stdin.read()))
    asyncio.run(serve(routes, Path(argv[0])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
