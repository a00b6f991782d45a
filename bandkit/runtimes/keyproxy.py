"""The host-side credential proxy: the sandbox sends the placeholder, the proxy the key.

Docker Sandboxes keep a real key on the host and put it on the wire for the sandbox.
Runtimes without that proxy (local host processes, the docker runtime, the sbx simulator)
run this one: a loopback reverse proxy per pinned upstream origin. The sandbox is hostile
(it can connect to any port it reaches, send malformed HTTP, choose hosts, read echoes),
so the proxy is narrow:

Client authentication: a per-box token. The host generates >=128 random bits per box and
hands them to the agent only inside its endpoint URLs (`http://127.0.0.1:PORT/<token>/...`
in BAND_REST_URL / BAND_WS_URL). Every request, the first on a connection and every later
keep-alive one, must start its target with `/<token>` (compared in constant time); the
prefix is stripped before forwarding, anything else gets 403 and the connection closes
before an upstream connection is even opened. Why a URL token: the band SDK keeps a base
URL's path for REST (it joins by concatenation) and for the Phoenix socket URL, so the
SDK needs no change, and it works the same for host processes, containers on the host
network and the simulator. A UNIX socket would need SDK transports; peer credentials
cannot tell two boxes apart (every local box runs as the same agent uid, a container's
peer is another pid namespace).

Credential custody: only the credential header is swapped, and only when its whole value
is a placeholder: `X-API-Key: <placeholder>` or `Authorization: Bearer <placeholder>`
(a duplicate credential header is refused). The key goes into no other header, the
target or a body. It never flows back either: every occurrence of it in a response
(status reason, headers, body, and after a WebSocket upgrade the raw server bytes) is
masked with `*` of the same length, so framing stays valid. For that the proxy must read
what it passes back, so it asks for `Accept-Encoding: identity` and offers the socket
upgrade without compression extensions.

Upstream: scheme, host and port are fixed by the host at start (the operator's platform);
the request's `Host`, target form or anything in the sandbox never selects one. Plain
http/ws only to a loopback upstream; a non-loopback one is refused at start.

Parsing: each request head is checked on its raw bytes first, where h11 is lenient (bare
LF, obs-fold, Content-Length with Transfer-Encoding, a duplicate or non-digit
Content-Length, any Transfer-Encoding but `chunked`, absolute/authority/asterisk-form
targets, CONNECT, an Upgrade other than websocket): 400 and close. The head is then
parsed by h11, a fresh parser per request, fed only bytes that passed the check; the
request is re-serialised by h11 for the upstream (our own Host and framing, hop-by-hop
headers and trailers dropped), so the upstream never parses a byte the sandbox framed.
Responses are parsed by h11 and written back in the proxy's own framing (Content-Length
as received, else chunked; hop-by-hop headers dropped). After a 101 the connection is
piped raw both ways.

Run as `python -P -m bandkit.runtimes.keyproxy PORTS_FILE` with the config as JSON on
stdin: `{"token": "<token>", "routes": [{"upstream": "https://host:443", "swaps":
[["proxy-managed", "<key>"]], "ca_pem": ""}]}`. It writes `{"ports": [...]}` (one per
route, same order) to PORTS_FILE (0600, never through a link), then serves until SIGTERM
or until PORTS_FILE's directory (its box) no longer exists. Keys and the token never
reach argv, the ports file or a log line; a connection's failure is never logged.

Parts, one concern a module: `keyproxy_heads` vets each raw request head, checks the
token and builds the headers each side gets (`vet_head`, `check_head`, `strip_token`,
`forward_headers`, `response_head`); `keyproxy_config` parses the config into pinned
`Route`s and masks keys in responses (`parse_config`, `Scrubber`); `keyproxy_conn` is the
connection state machine (`Session`, `Upstream`, the raw WebSocket pipe); this module
serves the routes and is the entry point. Its names are re-exported here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import signal
import ssl
import sys
from pathlib import Path

from bandkit.runtimes.keyproxy_config import (
    MIN_TOKEN_CHARS,
    ConfigError,
    Route,
    Scrubber,
    is_loopback,
    parse_config,
)
from bandkit.runtimes.keyproxy_conn import (
    CONNECT_TIMEOUT_S,
    HOLD_FLUSH_S,
    READ_SIZE,
    Session,
    Upstream,
)
from bandkit.runtimes.keyproxy_heads import (
    CREDENTIAL_HEADERS,
    DROP_REQUEST,
    DROP_RESPONSE,
    HEAD_LIMIT,
    BadRequest,
    check_head,
    connection_tokens,
    forward_headers,
    response_head,
    strip_token,
    vet_head,
)

__all__ = [
    "CONNECT_TIMEOUT_S",
    "CREDENTIAL_HEADERS",
    "DROP_REQUEST",
    "DROP_RESPONSE",
    "HEAD_LIMIT",
    "HOLD_FLUSH_S",
    "MIN_TOKEN_CHARS",
    "ORPHAN_CHECK_S",
    "READ_SIZE",
    "BadRequest",
    "ConfigError",
    "Route",
    "Scrubber",
    "Session",
    "Upstream",
    "check_head",
    "connection_tokens",
    "forward_headers",
    "is_loopback",
    "main",
    "parse_config",
    "response_head",
    "serve",
    "strip_token",
    "vet_head",
]

ORPHAN_CHECK_S = 2.0


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
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
) -> None:
    await Session(route, token, context, reader, writer).run()


async def serve(
    token: bytes, routes: list[Route], ports_file: Path, host: str = "127.0.0.1"
) -> None:
    from bandkit.fsio import write_private  # stdlib-only, cheap

    servers = []
    for route in routes:
        handler = functools.partial(_handle, route, token, _tls_context(route))
        servers.append(await asyncio.start_server(handler, host, 0, limit=READ_SIZE))
    ports = [s.sockets[0].getsockname()[1] for s in servers]
    write_private(ports_file, json.dumps({"ports": ports}))
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
    if len(argv) not in (1, 2):
        sys.stderr.write(
            "usage: python -m bandkit.runtimes.keyproxy PORTS_FILE [HOST] < config.json\n"
        )
        return 2
    try:
        token, routes = parse_config(json.loads(sys.stdin.read()))
    except (ConfigError, ValueError, KeyError, TypeError) as exc:
        reason = str(exc) if isinstance(exc, ConfigError) else "malformed config"
        sys.stderr.write(f"keyproxy: {reason}\n")
        return 2
    asyncio.run(serve(token, routes, Path(argv[0]), *argv[1:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
