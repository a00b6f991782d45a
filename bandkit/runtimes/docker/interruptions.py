"""Interruptions of a docker box (the smoke's drills): freeze and thaw its container, cut
it off its sandbox network and connect it again with the same endpoint (`Endpoint`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bandkit.runtimes.base import SandboxError, validate_name
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.docker.ownership import Box


@dataclass(frozen=True)
class Endpoint:
    """A container's endpoint on one network: what `docker network connect` restores."""

    network: str
    ip: str
    gateway: str
    mac: str
    aliases: tuple[str, ...]  # without the container's own short id (docker adds it)
    pinned: tuple[tuple[str, str], ...] = ()  # --ip / --ip6 / --link-local-ip as set
    links: tuple[str, ...] = ()
    driver_opts: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_inspect(cls, network: str, container_id: str, entry: Mapping[str, Any]) -> Endpoint:
        ipam = entry.get("IPAMConfig") or {}
        pinned = [("--ip", str(ipam.get("IPv4Address") or ""))]
        pinned += [("--ip6", str(ipam.get("IPv6Address") or ""))]
        pinned += [("--link-local-ip", str(ip)) for ip in ipam.get("LinkLocalIPs") or []]
        short = container_id[:12]
        return cls(
            network=network,
            ip=str(entry.get("IPAddress") or ""),
            gateway=str(entry.get("Gateway") or ""),
            mac=str(entry.get("MacAddress") or ""),
            aliases=tuple(sorted(str(a) for a in entry.get("Aliases") or [] if a != short)),
            pinned=tuple((flag, value) for flag, value in pinned if value),
            links=tuple(sorted(str(link) for link in entry.get("Links") or [])),
            driver_opts=tuple(sorted((entry.get("DriverOpts") or {}).items())),
        )

    def connect_args(self) -> list[str]:
        args = [part for alias in self.aliases for part in ("--alias", alias)]
        args += [part for flag, value in self.pinned for part in (flag, value)]
        args += [part for link in self.links for part in ("--link", link)]
        args += [part for k, v in self.driver_opts for part in ("--driver-opt", f"{k}={v}")]
        return args

    def same_as(self, other: Endpoint) -> bool:
        """The same endpoint config (the endpoint id is new by design); the address and
        gateway too unless this one has none (a stopped container holds no address)."""
        config = (self.network, self.aliases, self.pinned, self.links, self.driver_opts)
        theirs = (other.network, other.aliases, other.pinned, other.links, other.driver_opts)
        addresses = not self.ip or (self.ip, self.gateway) == (other.ip, other.gateway)
        return config == theirs and addresses

    def __str__(self) -> str:
        aliases = ",".join(self.aliases) or "none"
        return f"{self.ip} via {self.gateway} (mac {self.mac}, aliases {aliases})"


def pause(engine: Engine, name: str) -> None:
    """Freeze every process of the container (cgroup freezer): a host asleep."""
    engine.run("pause", validate_name(name), what="pause")


def unpause(engine: Engine, name: str) -> None:
    engine.run("unpause", validate_name(name), what="unpause")


def endpoint(engine: Engine, box: Box) -> Endpoint | None:
    """The container's endpoint on its sandbox network; None when disconnected."""
    network = box.owner().get("network", "")
    if not network:
        raise SandboxError(f"docker: no sandbox network recorded for {box.name!r}")
    out = engine.run(
        "inspect",
        "--type",
        "container",
        "--format",
        "{{json .Id}} {{json .NetworkSettings.Networks}}",
        box.name,
        what="inspect",
    ).stdout
    ident, _, networks = out.strip().partition(" ")
    entry = (json.loads(networks or "null") or {}).get(network)
    return None if entry is None else Endpoint.from_inspect(network, json.loads(ident), entry)


def disconnect(engine: Engine, box: Box) -> Endpoint:
    """Cut the container off its network; the endpoint as it was, for `reconnect`."""
    before = endpoint(engine, box)
    if before is None:
        raise SandboxError(f"docker: {box.name} is not connected to its sandbox network")
    engine.run("network", "disconnect", before.network, box.name, what="network disconnect")
    return before


def reconnect(engine: Engine, box: Box, before: Endpoint) -> Endpoint:
    """Connect the container again with the same endpoint config (aliases, pinned
    addresses, links); SandboxError when it came back different."""
    argv = ["network", "connect", *before.connect_args(), before.network, box.name]
    engine.run(*argv, what="network connect")
    after = endpoint(engine, box)
    if after is None or not after.same_as(before):
        raise SandboxError(
            f"docker: {box.name} came back on {before.network} as {after} instead of {before}"
        )
    return after
