"""The credential proxy's configuration (routes, token) and the key masking of responses.

`parse_config` turns the stdin JSON into the token and one `Route` per pinned upstream;
`Scrubber` masks every occurrence of a key in what flows back (see
`bandkit.runtimes.keyproxy` for the security contract).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

MIN_TOKEN_CHARS = 22  # 22 urlsafe-base64 characters are 132 bits

_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


class ConfigError(Exception):
    """The proxy's configuration is unusable; the message carries no secret value."""


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
