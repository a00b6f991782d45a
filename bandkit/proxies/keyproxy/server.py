"""The credential proxy's listeners: one per route, one client count for all (per box).

`serve` listens for every route, writes the ports file and serves each connection as a
`session.Session` until cancelled; `main` is the entry point (see
`bandkit.proxies.keyproxy`): the config from stdin, serving until SIGTERM/SIGINT or
until the ports file's directory (its box) is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import signal
import ssl
import sys
from pathlib import Path

from bandkit.fsio import write_private
from bandkit.proxies.keyproxy.config import ConfigError, Limits, Route, parse_config
from bandkit.proxies.keyproxy.session import TOO_MANY, Session
from bandkit.proxies.wire import BUFFER, ClientSlots, until_stopped


def _tls_context(route: Route) -> ssl.SSLContext | None:
    if not route.tls:
        return None
    context = ssl.create_default_context()
    if route.ca_pem:
        context.load_verify_locations(cadata=route.ca_pem)
    return context


async def _handle(
    route: Route,
    token: bytes,
    context: ssl.SSLContext | None,
    limits: Limits,
    slots: ClientSlots,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    if not slots.take():  # over the box's cap: refused unread
        with contextlib.suppress(Exception):
            writer.write(TOO_MANY)
            writer.close()
        return
    try:
        await Session(route, token, context, reader, writer, limits).run()
    finally:
        slots.give()


async def serve(
    token: bytes,
    routes: list[Route],
    ports_file: Path,
    host: str = "127.0.0.1",
    limits: Limits | None = None,
) -> None:
    """Listen for every route, write their ports to `ports_file`, serve until cancelled."""
    limits = limits or Limits()
    slots = ClientSlots(limits.max_clients)  # one count for every route: per box
    servers = []
    for route in routes:
        handler = functools.partial(_handle, route, token, _tls_context(route), limits, slots)
        servers.append(
            await asyncio.start_server(
                handler, host, route.listen_port, limit=BUFFER, reuse_address=True
            )
        )
    ports = [s.sockets[0].getsockname()[1] for s in servers]
    write_private(ports_file, json.dumps({"ports": ports}))
    try:
        await asyncio.Event().wait()
    finally:
        for server in servers:
            server.close()


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        sys.stderr.write(
            "usage: python -m bandkit.proxies.keyproxy PORTS_FILE [HOST] < config.json\n"
        )
        return 2
    try:
        token, routes, limits = parse_config(json.loads(sys.stdin.read()))
    except (ConfigError, ValueError, KeyError, TypeError) as exc:
        reason = str(exc) if isinstance(exc, ConfigError) else "malformed config"
        sys.stderr.write(f"keyproxy: {reason}\n")
        return 2
    host = argv[1] if len(argv) > 1 else "127.0.0.1"
    ports_file = Path(argv[0])
    serving = serve(token, routes, ports_file, host, limits)
    asyncio.run(until_stopped(serving, ports_file.parent, (signal.SIGTERM, signal.SIGINT)))
    return 0
