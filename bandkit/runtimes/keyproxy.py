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
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hmac
import ipaddress
import json
import re
import signal
import ssl
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import h11

HEAD_LIMIT = 64 * 1024
READ_SIZE = 64 * 1024
ORPHAN_CHECK_S = 2.0
CONNECT_TIMEOUT_S = 10.0
HOLD_FLUSH_S = 0.05  # raw mode: how long a possible key prefix is held for the next read
MIN_TOKEN_CHARS = 22  # 22 urlsafe-base64 characters are 132 bits

CREDENTIAL_HEADERS = frozenset({b"x-api-key", b"authorization"})
# Hop-by-hop or framing headers the proxy sets itself (or refuses to pass on).
DROP_REQUEST = frozenset(
    {
        b"host",
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"content-length",
        b"upgrade",
        b"expect",
        b"accept-encoding",
        b"sec-websocket-extensions",
    }
)
DROP_RESPONSE = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"trailer"}
)

_BARE_LF = re.compile(rb"(?<!\r)\n")
_CONTENT_LENGTH = re.compile(rb" ?[0-9]{1,18}")
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_CLOSE = b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_FORBIDDEN = b"HTTP/1.1 403 Forbidden" + _CLOSE
_BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway" + _CLOSE


class ConfigError(Exception):
    """The proxy's configuration is unusable; the message carries no secret value."""


class BadRequest(Exception):
    """Answer 400 (or `status`) and close."""

    def __init__(self, status: int = 400) -> None:
        super().__init__(status)
        self.status = status


@dataclass(frozen=True)
class Route:
    host: str
    port: int
    tls: bool
    swaps: tuple[tuple[bytes, bytes], ...]  # (placeholder, key)
    ca_pem: str = ""  # trusted in addition to the system roots (a TLS platform's own CA)
    credentials: dict[tuple[bytes, bytes], bytes] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        for placeholder, key in self.swaps:
            self.credentials[(b"x-api-key", placeholder)] = key
            self.credentials[(b"authorization", b"Bearer " + placeholder)] = b"Bearer " + key

    @property
    def authority(self) -> bytes:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.tls else 80
        return (host if self.port == default else f"{host}:{self.port}").encode()

    @property
    def keys(self) -> tuple[bytes, ...]:
        return tuple(key for _, key in self.swaps)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _header_value(text: str, what: str) -> bytes:
    try:
        value = text.encode("ascii")
    except UnicodeEncodeError:
        raise ConfigError(f"{what} must be ASCII") from None
    if not value or any(b < 0x21 or b == 0x7F for b in value):
        raise ConfigError(f"{what} must be non-empty visible ASCII without spaces")
    return value


def parse_config(config: object) -> tuple[bytes, list[Route]]:
    """(token, routes) from the stdin JSON; ConfigError names what is wrong."""
    if not isinstance(config, dict):
        raise ConfigError("the config must be a JSON object")
    token = config.get("token")
    if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS or not _TOKEN.fullmatch(token):
        raise ConfigError(
            f"the token must be at least {MIN_TOKEN_CHARS} characters of [A-Za-z0-9_-]"
        )
    routes: list[Route] = []
    for raw in config.get("routes") or []:
        parts = urlsplit(str(raw["upstream"]))
        host = parts.hostname or ""
        if parts.scheme not in ("https", "wss", "http", "ws") or not host:
            raise ConfigError(f"upstream {parts.scheme}://{host} must be http(s) or ws(s)")
        tls = parts.scheme in ("https", "wss")
        if not tls and not is_loopback(host):
            raise ConfigError(
                f"refusing plain {parts.scheme}:// upstream {host}: without TLS the key may "
                "only go to a loopback platform (use https/wss)"
            )
        if parts.path not in ("", "/") or parts.query or parts.username or parts.password:
            raise ConfigError(f"upstream for {host} must be an origin (scheme://host:port)")
        swaps = tuple(
            (_header_value(p, "a placeholder"), _header_value(v, "a key")) for p, v in raw["swaps"]
        )
        if not swaps:
            raise ConfigError(f"the route to {host} has no swaps")
        port = parts.port or (443 if tls else 80)
        routes.append(Route(host, port, tls, swaps, str(raw.get("ca_pem") or "")))
    return token.encode(), routes


def vet_head(buf: bytes) -> int | None:
    """The length of the request head at the start of `buf` (None: not complete yet),
    once it passed `check_head`; BadRequest for a bare LF anywhere in it or one too long."""
    end = buf.find(b"\r\n\r\n")
    if _BARE_LF.search(buf, 0, end + 4 if end >= 0 else len(buf)):
        raise BadRequest
    if end < 0:
        if len(buf) > HEAD_LIMIT:
            raise BadRequest(431)
        return None
    check_head(buf[: end + 4])
    return end + 4


def check_head(head: bytes) -> None:
    """Refuse, on the raw bytes, what h11 would accept but a proxy must not pass on.

    `head` ends with CRLF CRLF; bare LF was already refused by the reader.
    """
    lines = head[:-4].split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3:
        raise BadRequest
    method, target, _ = parts
    if method == b"CONNECT" or not target.startswith(b"/"):
        raise BadRequest  # authority-, absolute- and asterisk-form: the proxy picks the origin
    lengths = encodings = 0
    for line in lines[1:]:
        if not line or line[:1] in (b" ", b"\t"):
            raise BadRequest  # obs-fold
        name, _, value = line.partition(b":")
        name = name.lower()
        if name == b"content-length":
            lengths += 1
            if not _CONTENT_LENGTH.fullmatch(value):
                raise BadRequest
        elif name == b"transfer-encoding":
            encodings += 1
            if value.strip(b" \t").lower() != b"chunked":
                raise BadRequest
    if lengths > 1 or encodings > 1 or (lengths and encodings):
        raise BadRequest


def strip_token(target: bytes, token: bytes) -> bytes | None:
    """The target without its `/<token>` prefix, or None when the token is not there."""
    prefix = b"/" + token
    head, rest = target[: len(prefix)], target[len(prefix) :]
    if not hmac.compare_digest(head, prefix) or rest[:1] not in (b"", b"/", b"?"):
        return None
    return rest if rest.startswith(b"/") else b"/" + rest


def _is_upgrade(request: h11.Request) -> bool:
    values = [v for n, v in request.headers if n == b"upgrade"]
    if not values:
        return False
    if request.method != b"GET" or [v.lower() for v in values] != [b"websocket"]:
        raise BadRequest
    return True


def connection_tokens(request: h11.Request) -> set[bytes]:
    return {
        token.strip().lower()
        for name, value in request.headers
        if name == b"connection"
        for token in value.split(b",")
    }


def response_head(response: h11.Response, scrub: Scrubber, *, chunked: bool, close: bool) -> bytes:
    """The response head the client gets: the upstream's status and end-to-end headers
    (the key masked in each), our own framing and connection headers."""
    lines = [b"HTTP/1.1 %d %s" % (response.status_code, scrub.mask(response.reason))]
    for name, value in response.headers:
        if name in DROP_RESPONSE or (chunked and name == b"content-length"):
            continue
        lines.append(name + b": " + scrub.mask(value))
    if chunked:
        lines.append(b"transfer-encoding: chunked")
    if close:
        lines.append(b"connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n"


def forward_headers(request: h11.Request, route: Route, upgrade: bool) -> list[tuple[bytes, bytes]]:
    """The request headers the upstream gets: our Host and framing, hop-by-hop ones gone,
    the credential header swapped when (and only when) its whole value is a placeholder."""
    named = connection_tokens(request)
    out: list[tuple[bytes, bytes]] = [(b"host", route.authority), (b"accept-encoding", b"identity")]
    seen: set[bytes] = set()
    length: bytes | None = None
    chunked = False
    for name, value in request.headers:
        if name == b"content-length":
            length = value
        elif name == b"transfer-encoding":
            chunked = True
        if name in DROP_REQUEST or name in named:
            continue
        if name in CREDENTIAL_HEADERS:
            if name in seen:
                raise BadRequest
            seen.add(name)
            value = route.credentials.get((name, value), value)
        out.append((name, value))
    if chunked:
        out.append((b"transfer-encoding", b"chunked"))
    elif length is not None:
        out.append((b"content-length", length))
    if upgrade:
        out += [(b"connection", b"Upgrade"), (b"upgrade", b"websocket")]
    return out


class Scrubber:
    """Masks every occurrence of a key in a byte stream, across read boundaries: a tail
    that could start a key is held back until the next piece (or `flush`)."""

    def __init__(self, keys: tuple[bytes, ...]) -> None:
        self.keys = tuple(k for k in keys if k)
        self.held = b""

    def mask(self, data: bytes) -> bytes:
        for key in self.keys:
            if key in data:
                data = data.replace(key, b"*" * len(key))
        return data

    def feed(self, data: bytes) -> bytes:
        data = self.mask(self.held + data)
        keep = 0
        for key in self.keys:
            # The longest tail of `data` that a key starts with: only where its first byte is.
            at = data.find(key[:1], max(0, len(data) - len(key) + 1))
            while at != -1 and len(data) - at > keep:
                if key.startswith(data[at:]):
                    keep = len(data) - at
                    break
                at = data.find(key[:1], at + 1)
        self.held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep] if keep else data

    def flush(self) -> bytes:
        held, self.held = self.held, b""
        return held


class Upstream:
    """The connection to the pinned upstream: h11 writes the requests, parses responses.
    Output is collected and written in one piece per `flush` (one send, not one per
    event: on loopback each send costs more than the parsing)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.conn = h11.Connection(h11.CLIENT, max_incomplete_event_size=HEAD_LIMIT)
        self.pending: list[bytes] = []

    def send(self, event: h11.Event) -> None:
        data = self.conn.send(event)
        if data:
            self.pending.append(data)

    async def flush(self) -> None:
        if self.pending:
            self.writer.write(b"".join(self.pending))
            self.pending.clear()
            await self.writer.drain()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class Session:
    """One client connection: requests in turn, each checked, authenticated, rebuilt."""

    def __init__(
        self,
        route: Route,
        token: bytes,
        context: ssl.SSLContext | None,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.route, self.token, self.context = route, token, context
        self.reader, self.writer = reader, writer
        self.buf = b""
        self.upstream: Upstream | None = None

    async def run(self) -> None:
        try:
            while await self.cycle():
                pass
        except BadRequest as exc:
            line = (
                b"431 Request Header Fields Too Large" if exc.status == 431 else b"400 Bad Request"
            )
            self.writer.write(b"HTTP/1.1 " + line + _CLOSE)
        except (OSError, EOFError, h11.ProtocolError, asyncio.IncompleteReadError, TimeoutError):
            pass
        finally:
            if self.upstream is not None:
                self.upstream.close()
            with contextlib.suppress(Exception):
                await self.writer.drain()
            self.writer.close()

    async def read_head(self) -> bool:
        """Buffer one vetted request head (False: the client closed first)."""
        while vet_head(self.buf) is None:
            chunk = await self.reader.read(READ_SIZE)
            if not chunk:
                return False
            self.buf += chunk
        return True

    async def client_data(self, server: h11.Connection) -> None:
        chunk = await self.reader.read(READ_SIZE)
        if not chunk:
            raise EOFError
        server.receive_data(chunk)

    async def cycle(self) -> bool:
        """One request and its response; True when the connection stays open."""
        if not await self.read_head():
            return False
        server = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
        server.receive_data(self.buf)
        self.buf = b""
        try:
            request = server.next_event()
            if not isinstance(request, h11.Request):
                raise BadRequest
            target = strip_token(request.target, self.token)
            if target is None:
                self.writer.write(_FORBIDDEN)
                return False
            upgrade = _is_upgrade(request)
            headers = forward_headers(request, self.route, upgrade)
        except h11.RemoteProtocolError:
            raise BadRequest from None
        if server.they_are_waiting_for_100_continue:
            self.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        upstream = await self.connect()
        if upstream is None:
            return False
        upstream.send(h11.Request(method=request.method, target=target, headers=headers))
        while True:
            try:
                event = server.next_event()
            except h11.RemoteProtocolError:
                raise BadRequest from None
            if event is h11.NEED_DATA:
                await upstream.flush()
                await self.client_data(server)
            elif isinstance(event, h11.Data):
                upstream.send(h11.Data(data=event.data))
            elif isinstance(event, h11.EndOfMessage):
                upstream.send(h11.EndOfMessage())  # request trailers are not passed on
                break
            else:
                raise BadRequest
        await upstream.flush()
        self.buf = bytes(server.trailing_data[0])
        keep = request.http_version == b"1.1" and b"close" not in connection_tokens(request)
        return await self.respond(server, upstream, request.method, keep)

    async def connect(self) -> Upstream | None:
        """The upstream connection: kept alive across requests, renewed once the upstream
        closed it while idle (its own keep-alive timeout); None after answering 502."""
        if self.upstream is not None:
            if not (self.upstream.reader.at_eof() or self.upstream.writer.is_closing()):
                return self.upstream
            self.upstream.close()
            self.upstream = None
        route = self.route
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(
                    route.host,
                    route.port,
                    ssl=self.context,
                    server_hostname=route.host if self.context else None,
                    limit=READ_SIZE,
                ),
                CONNECT_TIMEOUT_S,
            )
        except (OSError, TimeoutError, ssl.SSLError):
            self.writer.write(_BAD_GATEWAY)
            return None
        self.upstream = Upstream(reader, writer)
        return self.upstream

    async def respond(
        self, server: h11.Connection, upstream: Upstream, method: bytes, keep: bool
    ) -> bool:
        """Relay the upstream's response (the key masked) in our own framing; True when
        the client connection stays open for another request."""
        scrub = Scrubber(self.route.keys)
        out: list[bytes] = []
        chunked = started = False
        while True:
            try:
                event = upstream.conn.next_event()
                if event is h11.NEED_DATA:
                    if out:  # what is complete so far goes out in one piece
                        self.writer.write(b"".join(out))
                        out.clear()
                        await self.writer.drain()
                    upstream.conn.receive_data(await upstream.reader.read(READ_SIZE))
                    continue
            except (OSError, h11.ProtocolError):
                event = None
            if isinstance(event, h11.InformationalResponse):
                if event.status_code == 101:
                    await self.switch(server, upstream, event, scrub)
                    return False
                continue  # a 100 Continue was ours to send, not the upstream's
            if isinstance(event, h11.Response):
                names = {name for name, _ in event.headers}
                bodiless = method == b"HEAD" or event.status_code in (204, 304)
                sized = b"content-length" in names and b"transfer-encoding" not in names
                chunked = not (bodiless or sized)
                if chunked and not keep:
                    chunked = False  # an HTTP/1.0 or closing client: the close ends the body
                out.append(response_head(event, scrub, chunked=chunked, close=not keep))
                started = True
            elif isinstance(event, h11.Data):
                out.append(_body(scrub.feed(bytes(event.data)), chunked))
            elif isinstance(event, h11.EndOfMessage):
                out.append(_body(scrub.flush(), chunked))
                out.append(b"0\r\n\r\n" if chunked else b"")
                break
            else:  # the upstream failed or closed before the response ended
                self.writer.write(b"".join(out) if started else _BAD_GATEWAY)
                return False
        self.writer.write(b"".join(out))
        await self.writer.drain()
        if upstream.conn.our_state is h11.DONE and upstream.conn.their_state is h11.DONE:
            upstream.conn.start_next_cycle()
        else:
            upstream.close()
            self.upstream = None
        return keep

    async def switch(
        self,
        server: h11.Connection,
        upstream: Upstream,
        event: h11.InformationalResponse,
        scrub: Scrubber,
    ) -> None:
        """The upstream accepted a WebSocket upgrade: pass the 101 on, then pipe raw."""
        lines = [b"HTTP/1.1 101 %s" % scrub.mask(event.reason)]
        lines += [name + b": " + scrub.mask(value) for name, value in event.headers]
        self.writer.write(b"\r\n".join(lines) + b"\r\n\r\n")
        client_rest = bytes(server.trailing_data[0])
        upstream_rest = bytes(upstream.conn.trailing_data[0])
        if client_rest:
            upstream.writer.write(client_rest)
        await asyncio.gather(
            _pipe(self.reader, upstream.writer, None, b""),
            _pipe(upstream.reader, self.writer, scrub, upstream_rest),
        )


def _body(data: bytes, chunked: bool) -> bytes:
    if not data or not chunked:
        return data
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    scrub: Scrubber | None,
    first: bytes,
) -> None:
    try:
        chunk = first
        while True:
            if chunk:
                writer.write(scrub.feed(chunk) if scrub else chunk)
                await writer.drain()
            if scrub is not None and scrub.held:
                try:
                    chunk = await asyncio.wait_for(reader.read(READ_SIZE), HOLD_FLUSH_S)
                except TimeoutError:
                    writer.write(scrub.flush())
                    chunk = b""
                    continue
            else:
                chunk = await reader.read(READ_SIZE)
            if not chunk:
                if scrub is not None:
                    writer.write(scrub.flush())
                break
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


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
