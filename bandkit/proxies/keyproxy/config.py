"""The credential proxy's configuration (routes, token, limits) and the key masking of
responses.

`parse_config` turns the stdin JSON into the token, one `Route` per pinned upstream (the
paths it forwards, each key with the path prefixes it is swapped in under) and the
connection `Limits`; `Scrubber` masks every occurrence of a key in what flows back (see
`bandkit.proxies.keyproxy` for the security contract).
"""

from __future__ import annotations

import ipaddress
import re
from collections import deque
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from bandkit.proxies.wire import HEAD_TIMEOUT_S, MAX_CLIENTS

MIN_TOKEN_CHARS = 22  # 22 urlsafe-base64 characters are 132 bits

_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@/-]*")


class ConfigError(Exception):
    """The proxy's configuration is unusable; the message carries no secret value."""


Swap = tuple[bytes, bytes, tuple[bytes, ...]]  # (placeholder, key, path prefixes)


@dataclass(frozen=True)
class Limits:
    """Per proxy process, so per box: how long a request head may take to arrive, and
    how many client connections may be open at once (more are refused)."""

    head_timeout_s: float = HEAD_TIMEOUT_S
    max_clients: int = MAX_CLIENTS


@dataclass(frozen=True)
class Route:
    host: str
    port: int
    tls: bool
    swaps: tuple[Swap, ...]
    paths: tuple[bytes, ...]  # the path prefixes forwarded at all (the upstream's API)
    ca_pem: str = ""  # trusted in addition to the system roots (a TLS platform's own CA)
    listen_port: int = 0  # where this route listens; 0 picks one (a restart passes the old)
    via: tuple[str, int] | None = None  # a relay the connection goes through (`_via`)
    credentials: dict[tuple[bytes, bytes], tuple[bytes, tuple[bytes, ...]]] = field(
        init=False, repr=False, compare=False, default_factory=dict
    )

    def __post_init__(self) -> None:
        for placeholder, key, prefixes in self.swaps:
            for header, value in (
                (b"x-api-key", placeholder),
                (b"authorization", b"Bearer " + placeholder),
            ):
                if (header, value) in self.credentials:
                    raise ConfigError(f"two keys share a placeholder on the route to {self.host}")
                swapped = key if header == b"x-api-key" else b"Bearer " + key
                self.credentials[(header, value)] = (swapped, prefixes)

    @property
    def authority(self) -> bytes:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.tls else 80
        return (host if self.port == default else f"{host}:{self.port}").encode()

    @property
    def keys(self) -> tuple[bytes, ...]:
        return tuple(key for _, key, _ in self.swaps)


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


def _paths(raw: object, what: str) -> tuple[bytes, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{what} must be a non-empty list of paths")
    out = []
    for path in raw:
        if not isinstance(path, str) or not _PATH.fullmatch(path):
            raise ConfigError(f"{what}: {str(path)[:60]!r} is not an absolute path")
        out.append(path.encode())
    return tuple(out)


def _limits(config: dict[str, object]) -> Limits:
    timeout = config.get("head_timeout_s", HEAD_TIMEOUT_S)
    clients = config.get("max_clients", MAX_CLIENTS)
    if not isinstance(timeout, int | float) or not 0 < timeout <= 3600:
        raise ConfigError("head_timeout_s must be a number of seconds in (0, 3600]")
    if not isinstance(clients, int) or not 1 <= clients <= 65536:
        raise ConfigError("max_clients must be an integer in [1, 65536]")
    return Limits(float(timeout), clients)


def _via(raw: object, host: str) -> tuple[str, int] | None:
    """A route's `via`: `ADDRESS:PORT` of a relay the host runs on a private network (the
    swarm runtime's, on the local cluster's hub) that carries the connection, unchanged, to
    the upstream; the request still names the upstream (Host, TLS server name). Only a
    private IPv4 literal, never a name DNS could answer for."""
    if raw is None:
        return None
    address, _, port = str(raw).rpartition(":")
    try:
        ip = ipaddress.IPv4Address(address)
        number = int(port)
    except ValueError:
        raise ConfigError(f"the route to {host}: via must be ADDRESS:PORT") from None
    if not ip.is_private or ip.is_unspecified or ip.is_loopback or not 0 < number < 65536:
        raise ConfigError(f"the route to {host}: via {ip} is not a private relay address")
    return str(ip), number


def parse_config(config: object) -> tuple[bytes, list[Route], Limits]:
    """(token, routes, limits) from the stdin JSON; ConfigError names what is wrong."""
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
            (
                _header_value(p, "a placeholder"),
                _header_value(v, "a key"),
                _paths(prefixes, f"a key's path prefixes on the route to {host}"),
            )
            for p, v, prefixes in raw["swaps"]
        )
        if not swaps:
            raise ConfigError(f"the route to {host} has no swaps")
        paths = _paths(raw.get("paths"), f"the paths of the route to {host}")
        port = parts.port or (443 if tls else 80)
        listen = raw.get("port", 0)
        if not isinstance(listen, int) or isinstance(listen, bool) or not 0 <= listen < 65536:
            raise ConfigError(f"the listening port of the route to {host} must be 0..65535")
        ca_pem = str(raw.get("ca_pem") or "")
        via = _via(raw.get("via"), host)
        routes.append(Route(host, port, tls, swaps, paths, ca_pem, listen_port=listen, via=via))
    return token.encode(), routes, _limits(config)


class Scrubber:
    """Masks every occurrence of a key in a byte stream, across read boundaries: a tail
    that could start a key is held back until the next piece decides it, however long
    that takes (never released on a timer). At the end (`flush`) a held tail is the start
    of a key that never completed: it is masked too, never released."""

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
        return b"*" * len(held)


class FrameScrubber:
    """`Scrubber` for a server's WebSocket stream (RFC 6455 5.2), across frame boundaries:
    the payloads of data frames (text, binary, continuation) are one scrubbed stream, so
    a key split over two frames, or two reads of one, however far apart, is masked; the
    frame headers between its pieces wait with it, in order. A control frame (ping, pong,
    close: at most 125 bytes, never fragmented) is passed on once complete, any key in
    it masked, without holding back its tail (a ping's payload is the server's random
    bytes: held, the pong would never come and the server would drop the socket); it
    waits only behind a data frame's held tail, as frame order requires (a text frame
    that ends with a key's first bytes: JSON never does). At the end whatever is still
    held is masked. Server frames are unmasked by the RFC, and compression is
    never offered, so payloads are literal."""

    def __init__(self, keys: tuple[bytes, ...]) -> None:
        self.scrub = Scrubber(keys)
        self.head = b""  # the header read so far of the frame being parsed
        self.left = 0  # payload bytes of the current frame still to come
        self.control = b""  # a control frame being collected (header and payload)
        self.total = 0  # data payload bytes received; `emitted` of them went out
        self.emitted = 0
        self.waiting: deque[tuple[int, bytes]] = deque()  # bytes due after payload N

    def _header_size(self) -> int:
        if len(self.head) < 2:
            return 2
        size = {126: 2, 127: 8}.get(self.head[1] & 0x7F, 0)
        return 2 + size + (4 if self.head[1] & 0x80 else 0)

    def _emit(self, payload: bytes, out: list[bytes]) -> None:
        """Payload bytes going out (masked as needed), with what waits between them."""
        at, end = 0, self.emitted + len(payload)
        while self.waiting and self.waiting[0][0] <= end:
            position, blob = self.waiting.popleft()
            cut = position - self.emitted
            out += [payload[at:cut], blob]
            at = cut
        out.append(payload[at:])
        self.emitted = end

    def _between(self, blob: bytes, out: list[bytes]) -> None:
        """Bytes that go out after every data payload byte received so far."""
        if self.scrub.held:
            self.waiting.append((self.total, blob))
        else:
            out.append(blob)

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        at = 0
        while at < len(data):
            if self.left:
                piece = data[at : at + self.left]
                at += len(piece)
                self.left -= len(piece)
                if self.control:
                    self.control += piece
                    if not self.left:
                        self._end_control(out)
                else:
                    self.total += len(piece)
                    self._emit(self.scrub.feed(piece), out)
                continue
            need = self._header_size() - len(self.head)
            self.head += data[at : at + need]
            at += need
            if len(self.head) < self._header_size():
                continue  # the length bytes tell how much more header there is
            head, self.head = self.head, b""
            length = head[1] & 0x7F
            if length >= 126:
                length = int.from_bytes(head[2 : 4 if length == 126 else 10], "big")
            self.left = length
            if head[0] & 0x08:  # a control frame: collected whole
                self.control = head
                if not length:
                    self._end_control(out)
            else:
                self._between(head, out)
        return b"".join(out)

    def _end_control(self, out: list[bytes]) -> None:
        frame, self.control = self.control, b""
        size = 2 + (4 if frame[1] & 0x80 else 0)
        self._between(frame[:size] + self.scrub.mask(frame[size:]), out)

    def flush(self) -> bytes:
        """The end of the stream: the held tail masked, then whatever waited behind it
        and any frame cut off in the middle (its key masked)."""
        out: list[bytes] = []
        self._emit(self.scrub.flush(), out)
        out += [blob for _, blob in self.waiting]
        self.waiting.clear()
        out += [self.scrub.mask(self.control), self.head]
        self.control = self.head = b""
        return b"".join(out)
