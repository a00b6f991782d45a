"""Egress rules: sbx host patterns, host and port parsing, and the policy they form.

Rules are sbx host patterns: `host`, `*.suffix` (one label), `**.suffix` (any depth),
`**` (any host), an IPv4 literal or `[IPv6]`, each optionally `:PORT`; without a port a
rule admits the web ports 80 and 443 only. A destination on a local address (loopback,
link-local, unspecified, multicast, or the sandbox's own network), named directly or
reached through DNS, is admitted only by a rule naming that exact address: `**` never
opens the host's loopback. `Policy` holds the static rules plus per-sandbox grants kept
in a grants file, re-read when it changes; `kit_allowlist` reads the kit's own rules.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bandkit.errors import BandkitError
from bandkit.fsio import read_regular

WEB_PORTS = frozenset({80, 443})

_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_PORT = re.compile(r"[0-9]{1,5}")


class EgressError(BandkitError):
    """A rule is malformed, or the egress proxy could not start; the message says which."""


@dataclass(frozen=True)
class Rule:
    """One allow rule. `kind`: exact | one (`*.x`) | any (`**.x`) | all (`**`) | ip."""

    text: str
    kind: str
    host: str
    ports: frozenset[int]
    source: str = "sandbox"

    def admits(self, host: str, port: int) -> bool:
        if port not in self.ports:
            return False
        if self.kind in ("exact", "ip"):
            return host == self.host
        if self.kind == "all":
            return True
        if self.kind == "any":
            return host.endswith("." + self.host) or host == self.host
        head, dot, tail = host.partition(".")
        return bool(head) and dot == "." and tail == self.host


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def split_host_port(text: str) -> tuple[str, str | None]:
    """`host[:port]`, `[v6][:port]` -> (host, port or None); no validation of either."""
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("unclosed [")
        rest = text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError("junk after ]")
        return text[1:end], (rest[1:] if rest else None)
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, port
    if ":" in text:
        raise ValueError("an IPv6 address must be written [addr]")
    return text, None


def normal_host(host: str) -> str:
    """A lower-case hostname or a canonical IP literal; ValueError for anything else."""
    address = _ip(host)
    if address is not None:
        return str(address)
    lowered = host.lower().rstrip(".")
    if len(lowered) > 253 or not _HOSTNAME.fullmatch(lowered):
        raise ValueError(f"not a hostname: {host[:80]!r}")
    return lowered


def _port(text: str) -> int:
    if not _PORT.fullmatch(text) or not 0 < int(text) < 65536:
        raise ValueError(f"not a port: {text[:10]!r}")
    return int(text)


def parse_rule(text: str, source: str = "sandbox") -> Rule:
    """A rule from its text (`pypi.org`, `*.band.ai:443`, `127.0.0.1:8080`, `**`)."""
    try:
        raw = text.strip()
        host_part, port_part = split_host_port(raw)
        ports = frozenset({_port(port_part)}) if port_part is not None else WEB_PORTS
        if host_part == "**":
            return Rule(raw, "all", "", ports, source)
        for prefix, kind in (("**.", "any"), ("*.", "one")):
            if host_part.startswith(prefix):
                suffix = normal_host(host_part[len(prefix) :])
                if _ip(suffix) is not None:
                    raise ValueError("a wildcard needs a domain suffix")
                return Rule(raw, kind, suffix, ports, source)
        host = normal_host(host_part)
        return Rule(raw, "ip" if _ip(host) is not None else "exact", host, ports, source)
    except ValueError as exc:
        raise EgressError(
            f"invalid egress rule {text[:80]!r} ({exc}): use host, *.domain, **.domain, "
            "an IP address or [IPv6], optionally with :PORT"
        ) from None


def is_local(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address,
    networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network] = (),
) -> bool:
    """An address on this host or its own networks, not the internet."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_loopback
        or address.is_link_local
        or address.is_unspecified
        or address.is_multicast
        or any(address in net for net in networks if net.version == address.version)
    )


class Policy:
    """Static rules plus the grants file, re-read whenever it changes."""

    def __init__(
        self,
        rules: Iterable[Rule],
        grants: Path | None = None,
        local_networks: Iterable[str] = (),
    ) -> None:
        self.static = tuple(rules)
        self.grants_path = grants
        self.local_networks = tuple(ipaddress.ip_network(n, strict=False) for n in local_networks)
        self._grants: tuple[Rule, ...] = ()
        self._stamp: tuple[int, int] | None = None

    def rules(self) -> tuple[Rule, ...]:
        return self.static + self._load_grants()

    def _load_grants(self) -> tuple[Rule, ...]:
        if self.grants_path is None:
            return ()
        try:
            info = os.stat(self.grants_path, follow_symlinks=False)
        except FileNotFoundError:
            self._grants, self._stamp = (), None
            return ()
        stamp = (info.st_mtime_ns, info.st_size)
        if stamp != self._stamp:
            grants: list[Rule] = []
            with contextlib.suppress(OSError, ValueError, BandkitError):
                data, _ = read_regular(self.grants_path, what="egress grants")
                grants = [parse_rule(str(t), "grant") for t in json.loads(data)]
            self._grants, self._stamp = tuple(grants), stamp
        return self._grants

    def match(self, host: str, port: int) -> Rule | None:
        """The first rule admitting host:port (deny rules do not exist: default deny)."""
        return next((r for r in self.rules() if r.admits(host, port)), None)

    def reachable(self, rule: Rule, addresses: Iterable[str]) -> list[str]:
        """The resolved addresses `rule` may reach: local ones only when named exactly."""
        out = []
        for text in addresses:
            address = _ip(text.split("%", 1)[0])
            if address is None:
                continue
            if is_local(address, self.local_networks) and not (
                rule.kind == "ip" and rule.host == str(address)
            ):
                continue
            out.append(text)
        return out


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def kit_allowlist(spec_path: Path | None = None) -> tuple[str, ...]:
    """`caps.network.allow` of the kit spec (`bandkit.image.facts.SPEC`), never retyped."""
    import yaml

    from bandkit.image.facts import SPEC

    path = spec_path or SPEC
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    allow = ((data.get("caps") or {}).get("network") or {}).get("allow")
    if not isinstance(allow, list) or not all(isinstance(h, str) for h in allow):
        raise EgressError(f"{path}: caps.network.allow must be a list of hosts")
    return tuple(allow)
