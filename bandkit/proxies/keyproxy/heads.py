"""Request heads for the credential proxy: raw-byte vetting, the token, the path, rebuilt
headers.

`vet_head`/`check_head` refuse on the raw bytes what h11 would accept but a proxy must not
pass on; `strip_token` checks the per-box URL token; `api_path` checks that the target is
a plain path below one of the route's API prefixes; `forward_headers` and `response_head`
build what each side gets (see `bandkit.proxies.keyproxy` for the security contract).
"""

from __future__ import annotations

import hmac
import re

import h11

from bandkit.proxies.keyproxy.config import Route, Scrubber
from bandkit.proxies.wire import HEAD_LIMIT, MalformedRequest

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
# Paths an upstream might read differently from us (an encoded dot, slash, backslash or
# NUL; a backslash; a dot or empty segment; a fragment): never an API path, refused.
_AMBIGUOUS = re.compile(rb"%(?:2e|2f|5c|00)|\\|/\.|//|#", re.IGNORECASE)
_CONTENT_LENGTH = re.compile(rb" ?[0-9]{1,18}")


def vet_head(buf: bytes) -> int | None:
    """The length of the request head at the start of `buf` (None: not complete yet),
    once it passed `check_head`; MalformedRequest for a bare LF anywhere in it or one too long."""
    end = buf.find(b"\r\n\r\n")
    if _BARE_LF.search(buf, 0, end + 4 if end >= 0 else len(buf)):
        raise MalformedRequest
    if end < 0:
        if len(buf) > HEAD_LIMIT:
            raise MalformedRequest("request head too large", 431)
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
        raise MalformedRequest
    method, target, _ = parts
    if method == b"CONNECT" or not target.startswith(b"/"):
        raise MalformedRequest  # authority-, absolute-, asterisk-form: the proxy picks the origin
    lengths = encodings = 0
    for line in lines[1:]:
        if not line or line[:1] in (b" ", b"\t"):
            raise MalformedRequest  # obs-fold
        name, _, value = line.partition(b":")
        name = name.lower()
        if name == b"content-length":
            lengths += 1
            if not _CONTENT_LENGTH.fullmatch(value):
                raise MalformedRequest
        elif name == b"transfer-encoding":
            encodings += 1
            if value.strip(b" \t").lower() != b"chunked":
                raise MalformedRequest
    if lengths > 1 or encodings > 1 or (lengths and encodings):
        raise MalformedRequest


def strip_token(target: bytes, token: bytes) -> bytes | None:
    """The target without its `/<token>` prefix, or None when the token is not there."""
    prefix = b"/" + token
    head, rest = target[: len(prefix)], target[len(prefix) :]
    if not hmac.compare_digest(head, prefix) or rest[:1] not in (b"", b"/", b"?"):
        return None
    return rest if rest.startswith(b"/") else b"/" + rest


def is_under(path: bytes, prefix: bytes) -> bool:
    """`path` is `prefix` or below it, at a segment boundary (`/` is every path)."""
    base = prefix.rstrip(b"/")
    return path == base or path.startswith(base + b"/")


def api_path(target: bytes, prefixes: tuple[bytes, ...]) -> bytes | None:
    """The target's path when it is plain (`_AMBIGUOUS` nowhere in it) and below one of
    `prefixes`; None otherwise. The query is the upstream's to read."""
    path = target.split(b"?", 1)[0]
    if _AMBIGUOUS.search(path) or not any(is_under(path, p) for p in prefixes):
        return None
    return path


def _is_upgrade(request: h11.Request) -> bool:
    values = [v for n, v in request.headers if n == b"upgrade"]
    if not values:
        return False
    if request.method != b"GET" or [v.lower() for v in values] != [b"websocket"]:
        raise MalformedRequest
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


def forward_headers(
    request: h11.Request, route: Route, upgrade: bool, path: bytes
) -> list[tuple[bytes, bytes]]:
    """The request headers the upstream gets: our Host and framing, hop-by-hop ones gone,
    the credential header swapped when (and only when) its whole value is a placeholder
    and `path` is below one of that key's prefixes."""
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
                raise MalformedRequest
            seen.add(name)
            swap = route.credentials.get((name, value))
            if swap is not None and any(is_under(path, p) for p in swap[1]):
                value = swap[0]
        out.append((name, value))
    if chunked:
        out.append((b"transfer-encoding", b"chunked"))
    elif length is not None:
        out.append((b"content-length", length))
    if upgrade:
        out += [(b"connection", b"Upgrade"), (b"upgrade", b"websocket")]
    return out
