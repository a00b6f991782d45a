"""Egress proxy requests: a request head parsed with h11 into a `Request`, and answers.

Two forms and nothing else: `CONNECT host:port`, and plain HTTP in absolute form
(`GET http://host[:port]/path HTTP/1.1`), rewritten to origin form with `Host` set to the
target and `Connection: close`, proxy headers dropped. Anything else is `Malformed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

import h11

from bandkit.runtimes.egress_rules import _bracket, _port, normal_host, split_host_port

HEAD_LIMIT = 64 * 1024  # a request head larger than this is malformed
DROPPED_HEADERS = frozenset(
    {b"host", b"connection", b"proxy-connection", b"proxy-authorization", b"keep-alive"}
)


class Malformed(Exception):
    """A request the proxy refuses to parse (answered 400)."""


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
    """A proxy request from a complete head (ending in CRLFCRLF); Malformed otherwise."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=HEAD_LIMIT)
    try:
        conn.receive_data(head)
        event = conn.next_event()
    except h11.RemoteProtocolError as exc:
        raise Malformed(f"unparseable request head ({exc})") from None
    if not isinstance(event, h11.Request):
        raise Malformed("incomplete request head")
    method = event.method.decode("ascii", "replace")
    target = event.target.decode("ascii", "replace")
    if method == "CONNECT":
        try:
            host, connect_port = split_host_port(target)
            if connect_port is None:
                raise ValueError("no port")
            return Request("connect", normal_host(host), _port(connect_port), method=method)
        except ValueError as exc:
            raise Malformed(f"CONNECT needs host:port ({exc})") from None
    parts = urlsplit(target)
    if parts.scheme.lower() != "http" or not target.lower().startswith("http://"):
        raise Malformed("only CONNECT and absolute-form http:// requests are proxied")
    try:
        if "@" in parts.netloc:
            raise ValueError("user information in the URL")
        host, port_text = split_host_port(parts.netloc)
        host = normal_host(host)
        port = _port(port_text) if port_text else 80
    except ValueError as exc:
        raise Malformed(f"bad absolute URL ({exc})") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    authority = Request("http", host, port).target if port != 80 else _bracket(host)
    version = event.http_version.decode("ascii")
    lines = [f"{method} {path} HTTP/{version}".encode("ascii"), b"Host: " + authority.encode()]
    for name, value in event.headers.raw_items():
        if name.lower() not in DROPPED_HEADERS:
            lines.append(name + b": " + value)
    lines.append(b"Connection: close")
    return Request("http", host, port, b"\r\n".join(lines) + b"\r\n\r\n", method)


def response(status: int, reason: str, text: str) -> bytes:
    body = (text + "\n").encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body
