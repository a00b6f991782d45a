"""Request heads for the credential proxy: raw-byte vetting, the token, rebuilt headers.

`vet_head`/`check_head` refuse on the raw bytes what h11 would accept but a proxy must not
pass on; `strip_token` checks the per-box URL token; `forward_headers` and `response_head`
build what each side gets (see `bandkit.runtimes.keyproxy` for the security contract).
"""

from __future__ import annotations

import hmac
import re

import h11

from bandkit.runtimes.keyproxy_config import Route, Scrubber

HEAD_LIMIT = 64 * 1024

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


class BadRequest(Exception):
    """Answer 400 (or `status`) and close."""

    def __init__(self, status: int = 400) -> None:
        super().__init__(status)
        self.status = status


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
