"""Egress proxy requests: a request head parsed with h11 into a `Request`, and answers.

Two forms and nothing else: `CONNECT host:port`, and plain HTTP in absolute form
(`GET http://host[:port]/path HTTP/1.1`), rewritten to origin form with `Host` set to the
target and `Connection: close`, proxy headers dropped. Anything else is a
`wire.MalformedRequest`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

import h11

from bandkit.proxies.egress.rules import _bracket, _port, normal_host, split_host_port
from bandkit.proxies.wire import HEAD_LIMIT, MalformedRequest

DROPPED_HEADERS = frozenset(
    {b"host", b"connection", b"proxy-connection", b"proxy-authorization", b"keep-alive"}
)


@dataclass(frozen=True)
class Request:
    proxy_type: str  # "connect" | "http"
    host: str
    port: int
    head: bytes = field(default=b"", repr=False)  # what goes upstream (http only)
    method: str = ""

    @property
    def target(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_request(head: bytes) -> Request:
    """A proxy request from a complete head (ending in CRLFCRLF); MalformedRequest otherwise."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
    try:
        conn.receive_data(head)
        event = conn.next_event()
    except h11.RemoteProtocolError as exc:
        raise MalformedRequest(f"unparseable request head ({exc})") from None
    if not isinstance(event, h11.Request):
        raise MalformedRequest("incomplete request head")
    method = event.method.decode("ascii", "replace")
    target = event.target.decode("ascii", "replace")
    if method == "CONNECT":
        try:
            host, connect_port = split_host_port(target)
            if connect_port is None:
                raise ValueError("no port")
            return Request("connect", normal_host(host), _port(connect_port), method=method)
        except ValueError as exc:
            raise MalformedRequest(f"CONNECT needs host:port ({exc})") from None
    parts = urlsplit(target)
    if parts.scheme.lower() != "http" or not target.lower().startswith("http://"):
        raise MalformedRequest("only CONNECT and absolute-form http:// requests are proxied")
    try:
        if "@" in parts.netloc:
            raise ValueError("user information in the URL")
        host, port_text = split_host_port(parts.netloc)
        host = normal_host(host)
        port = _port(port_text) if port_text else 80
    except ValueError as exc:
        raise MalformedRequest(f"bad absolute URL ({exc})") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authority = Request("http", host, port).target if port != 80 else _bracket(host)
    version = event.http_version.decode("ascii")
    lines = [f"{method} {path} HTTP/{version}".encode("ascii"), b"Host: " + authority.encode()]
    for name, value in event.headers.raw_items():
        if name.lower() not in DROPPED_HEADERS:
            lines.append(name + b": " + value)
    lines.append(b"Connection: close")
    return Request("http", host, port, b"\r\n".join(lines) + b"\r\n\r\n", method)
