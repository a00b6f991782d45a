"""Egress rules: sbx host patterns, host and port parsing, and the policy they form.

Rules are sbx host patterns: `host`, `*.suffix` (one label), `**.suffix` (any depth),
`**` (any host), an IPv4 literal or `[IPv6]`, each optionally `:PORT`; without a port a
rule admits the web ports 80 and 443 only. The proxy connects from the host, where the
host firewall (`hostguard`) never sees the traffic, so a destination that is not a
public internet address (this host's own addresses and the networks of its interfaces:
eth0, docker0 and every other bridge; loopback, link-local, private, shared/CGNAT,
unspecified, multicast, reserved; an IPv6 address carrying such an IPv4), named directly
or reached through DNS, is admitted only by a rule naming that exact address, or by a
platform route the runtime pinned (the local platform lives on 127.0.0.1): `**` or a
wildcard whose DNS the sandbox controls never opens the host. `Policy` holds the static
rules plus per-sandbox grants kept in a grants file, re-read when it changes, and decides
which resolved addresses a target's rules may reach (this host's addresses from
`hostnet`); `kit_allowlist` reads the kit's own rules.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bandkit.errors import BandkitError
from bandkit.fsio import read_regular
from bandkit.proxies.egress import hostnet

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


# Never reached through a wildcard or a name, only through a rule naming the address:
# loopback, link-local, private, shared and reserved ranges (the host's own interfaces'
# networks are added per decision). Spelled out, not `ipaddress`'s `is_global`: that
# one also refuses the documentation and benchmarking ranges, which no host or LAN uses
# but an intercepting resolver does (fake-IP proxies answer every name from 198.18/15,
# some sandboxed networks from 203.0.113/24), and its list changes between versions.
NON_PUBLIC = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",  # "this network": 0.x reaches the host itself on Linux
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT (shared address space)
        "127.0.0.0/8",
        "169.254.0.0/16",  # link-local, cloud metadata
        "172.16.0.0/12",  # docker's default bridge pools live here
        "192.0.0.0/24",  # IETF protocol assignments (DS-Lite, NAT64 discovery)
        "192.168.0.0/16",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
        "::/128",
        "::1/128",
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated, still routed by some)
        "ff00::/8",  # multicast
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPAT = ipaddress.ip_network("::/96")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _embedded(address: Address) -> list[Address]:
    """The address and any IPv4 address it carries (mapped, 6to4, NAT64, compatible):
    each of them must be public."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return [address.ipv4_mapped]  # an IPv4 address in IPv6 clothing: the IPv4 decides
    out: list[Address] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        packed = int(address) & 0xFFFFFFFF
        for v4 in (
            address.sixtofour,
            ipaddress.IPv4Address(packed) if address in _NAT64 else None,
            ipaddress.IPv4Address(packed) if address in _COMPAT else None,
        ):
            if v4 is not None:
                out.append(v4)
    return out


def is_local(address: Address, networks: Sequence[Network] = ()) -> bool:
    """Not a public internet address: this host or its networks (`networks`: the
    sandbox's own, the host's interfaces' ones), loopback, link-local, private, shared
    (CGNAT), unspecified, multicast, reserved; an IPv6 address carrying such an IPv4."""
    for candidate in _embedded(address):
        if (
            candidate.is_multicast
            or candidate.is_unspecified
            or candidate.is_loopback
            or candidate.is_link_local
            or any(candidate in net for net in NON_PUBLIC if net.version == candidate.version)
            or any(candidate in net for net in networks if net.version == candidate.version)
        ):
            return True
    return False


def names_address(rule: Rule, address: Address) -> bool:
    """A rule that may reach `address` even when it is local: an IP rule naming exactly
    it, or a platform route (an endpoint the runtime pinned host-side, never a name the
    sandbox chose: the local platform legitimately lives on 127.0.0.1)."""
    if rule.kind == "ip":
        return rule.host == str(address)
    return rule.source == "platform" and rule.kind == "exact"


class LocalRefused(EgressError):
    """Every resolved address of a target is local or private and no admitting rule names
    it (or this host's own addresses could not be listed: failing closed)."""


class Policy:
    """Static rules plus the grants file, re-read whenever it changes.

    `local_networks`: the sandbox's own network. `host_interfaces`: this host's addresses
    (`hostnet.interfaces`, asked afresh per decision: bridges come and go), whose
    addresses and on-link networks are refused like the sandbox's own.
    """

    def __init__(
        self,
        rules: Iterable[Rule],
        grants: Path | None = None,
        local_networks: Iterable[str] = (),
        host_interfaces: Callable[[], Sequence[hostnet.Interface]] = hostnet.interfaces,
    ) -> None:
        self.static = tuple(rules)
        self.grants_path = grants
        self.local_networks = tuple(ipaddress.ip_network(n, strict=False) for n in local_networks)
        self.host_interfaces = host_interfaces
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

    def admitting(self, host: str, port: int) -> list[Rule]:
        """Every rule admitting host:port, in order (no deny rules: default deny)."""
        return [r for r in self.rules() if r.admits(host, port)]

    def match(self, host: str, port: int) -> Rule | None:
        """The first rule admitting host:port."""
        return next(iter(self.admitting(host, port)), None)

    def reachable(self, rules: Sequence[Rule], addresses: Iterable[str]) -> list[tuple[str, Rule]]:
        """The resolved addresses `rules` (those admitting the target) may reach, each
        with the rule that reaches it: a public address by the first rule, a local or
        private one (this host, its networks, private ranges) only by a rule naming it
        (`names_address`). `LocalRefused` when addresses resolved but none is reachable."""
        out: list[tuple[str, Rule]] = []
        own: list[Network] | None = None
        texts = list(addresses)
        for text in texts:
            address = _ip(text.split("%", 1)[0])
            if address is None:
                continue
            naming = next((r for r in rules if names_address(r, address)), None)
            if naming is not None:
                out.append((text, naming))
                continue
            if is_local(address, self.local_networks):
                continue
            if own is None:
                try:
                    own = [i.network for i in self.host_interfaces()]
                except hostnet.HostNetError as exc:
                    raise LocalRefused(f"cannot list this host's addresses ({exc})") from None
            if not is_local(address, own) and rules:
                out.append((text, rules[0]))
        if not out and any(_ip(a.split("%", 1)[0]) for a in texts):
            raise LocalRefused("resolves to a local or private address")
        return out


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def kit_allowlist(spec_path: Path | None = None) -> tuple[str, ...]:
    """The kit spec's egress allowlist (`bandkit.image.facts.SPEC`), never retyped: the
    current shape's `permissions.network.allow`, or a legacy spec's `caps.network.allow`."""
    import yaml

    from bandkit.image.facts import SPEC

    path = spec_path or SPEC
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    block = data.get("permissions") if "permissions" in data else data.get("caps")
    allow = ((block or {}).get("network") or {}).get("allow")
    if not isinstance(allow, list) or not all(isinstance(h, str) for h in allow):
        raise EgressError(f"{path}: permissions.network.allow must be a list of hosts")
    return tuple(allow)
