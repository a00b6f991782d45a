"""One client connection of the credential proxy: the per-request state machine.

`Session` reads a vetted head (within the head deadline), authenticates it by the token,
checks its path against the route's API, rebuilds it for the pinned `Upstream`, relays
the response (the key masked) and, after a 101, pipes raw both ways, still masking (see
`bandkit.proxies.keyproxy` for the security contract).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import h11

from bandkit.proxies.keyproxy.config import FrameScrubber, Limits, Route, Scrubber
from bandkit.proxies.keyproxy.heads import (
    _is_upgrade,
    api_path,
    connection_tokens,
    forward_headers,
    response_head,
    strip_token,
    vet_head,
)
from bandkit.proxies.wire import BUFFER, HEAD_LIMIT, MalformedRequest, answer, copy, open_upstream

CONNECT_TIMEOUT_S = 10.0  # the pinned upstream (the platform, a model API)

_CLOSE = b"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
_FORBIDDEN = b"HTTP/1.1 403 Forbidden" + _CLOSE
_BAD_GATEWAY = b"HTTP/1.1 502 Bad Gateway" + _CLOSE

NOT_API = answer(
    403, "Forbidden", "the credential proxy forwards only the agent API paths of this upstream"
)
HEAD_TIMEOUT = answer(408, "Request Timeout", "no complete request head in time")
TOO_MANY = answer(503, "Service Unavailable", "too many open connections from this box")


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
        limits: Limits | None = None,
    ) -> None:
        self.route, self.token, self.context = route, token, context
        self.reader, self.writer = reader, writer
        self.limits = limits or Limits()
        self.buf = b""
        self.upstream: Upstream | None = None

    async def run(self) -> None:
        try:
            while await self.cycle():
                pass
        except MalformedRequest as exc:
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
        """Buffer one vetted request head (False: the client closed first, or sent no
        complete head within the deadline: a 408 when it had started one)."""
        try:
            async with asyncio.timeout(self.limits.head_timeout_s):
                while vet_head(self.buf) is None:
                    chunk = await self.reader.read(BUFFER)
                    if not chunk:
                        return False
                    self.buf += chunk
        except TimeoutError:
            self.buf += await self._handed_over_late()
            if self.buf:
                self.writer.write(HEAD_TIMEOUT)
            return False
        return True

    async def _handed_over_late(self) -> bytes:
        """Bytes the reader holds that the timed-out read never got: a loop that stalled
        past the deadline wakes with the data and the deadline at once, and the deadline
        wins. Read without waiting (a buffered read returns before the timeout can fire)."""
        try:
            async with asyncio.timeout(0):
                return await self.reader.read(BUFFER)
        except (TimeoutError, OSError):
            return b""

    async def client_data(self, server: h11.Connection) -> None:
        chunk = await self.reader.read(BUFFER)
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
                raise MalformedRequest
            target = strip_token(request.target, self.token)
            if target is None:
                self.writer.write(_FORBIDDEN)
                return False
            path = api_path(target, self.route.paths)
            if path is None:
                self.writer.write(NOT_API)  # the stub's pages, the human API, control routes
                return False
            upgrade = _is_upgrade(request)
            headers = forward_headers(request, self.route, upgrade, path)
        except h11.RemoteProtocolError:
            raise MalformedRequest from None
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
                raise MalformedRequest from None
            if event is h11.NEED_DATA:
                await upstream.flush()
                await self.client_data(server)
            elif isinstance(event, h11.Data):
                upstream.send(h11.Data(data=event.data))
            elif isinstance(event, h11.EndOfMessage):
                upstream.send(h11.EndOfMessage())  # request trailers are not passed on
                break
            else:
                raise MalformedRequest
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
        try:
            reader, writer = await open_upstream(
                self.route.host, self.route.port, CONNECT_TIMEOUT_S, self.context, self.route.via
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
                    upstream.conn.receive_data(await upstream.reader.read(BUFFER))
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
            _pipe(upstream.reader, self.writer, FrameScrubber(self.route.keys), upstream_rest),
        )


def _body(data: bytes, chunked: bool) -> bytes:
    if not data or not chunked:
        return data
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    scrub: FrameScrubber | None,
    first: bytes,
) -> None:
    """Copy raw bytes until EOF; towards the client (`scrub`) the key masked in the
    server's WebSocket stream, however its bytes are split or delayed (`FrameScrubber`)."""
    try:
        await copy(reader, writer, first=first, scrub=scrub)
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
