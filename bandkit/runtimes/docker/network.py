"""A docker box's network side: its sandbox network, its egress rules, its host firewall chain.

Each sandbox's internal bridge network has one way out, its egress proxy (`egress`) on
the gateway address: `egress_rule` and `platform_rules` make its rules, `policy_log`
reads its decisions. `address` reads the network's gateway and subnet; the host firewall
chain (`hostguard`) lets the bridge reach the host only at the egress proxy's port, and
`remove_firewall` removes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from bandkit.proxies import egress
from bandkit.runtimes import boxnet, hostguard
from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker.engine import Engine
from bandkit.runtimes.docker.ownership import Box

PLATFORM_ENV = ("BAND_REST_URL", "BAND_WS_URL")
# Endpoints the egress proxy admits as routes: the platform and the host-set model APIs
# (boxnet proxies both, so a model key is swapped in on the wire like the platform key).
ROUTE_ENV = (*PLATFORM_ENV, *boxnet.LLM_ENVS)
CONTAINER_LOOPBACK = "localhost,127.0.0.1,::1"  # NO_PROXY: the container's own loopback


def egress_rule(text: str, source: str) -> egress.Rule:
    try:
        return egress.parse_rule(text, source)
    except egress.EgressError as exc:
        raise SandboxError(f"docker: {exc}") from None


def platform_rules(env: Mapping[str, str]) -> list[egress.Rule]:
    """host:port rules for the platform endpoints in `env` (URLs the runtime made or
    the operator gave, never the workspace's)."""
    rules = []
    for key in ROUTE_ENV:
        parts = urlsplit(env.get(key, ""))
        if parts.hostname and parts.scheme in ("http", "https", "ws", "wss"):
            port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
            host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
            rules.append(egress_rule(f"{host}:{port}", "platform"))
    return rules


def address(engine: Engine, network: str) -> tuple[str, str]:
    """(gateway, subnet) of our network."""
    out = engine.run(
        "network",
        "inspect",
        "--format",
        "{{json .IPAM.Config}}",
        network,
        what="network inspect",
    ).stdout
    for entry in json.loads(out or "null") or []:
        if entry.get("Gateway") and entry.get("Subnet"):
            return str(entry["Gateway"]), str(entry["Subnet"])
    raise SandboxError(f"docker: network {network} has no gateway address")


def remove_firewall(owner: str, chain: str, tools: hostguard.Tools) -> None:
    if chain:
        try:
            hostguard.remove(owner, chain, tools)
        except hostguard.HostGuardError as exc:
            raise SandboxError(f"docker: {exc}") from None


def policy_log(box: Box) -> Sequence[dict[str, Any]]:
    """Every allowed and blocked request of the box's sandbox, oldest first."""
    try:
        return egress.read_log(box.path)
    except OSError as exc:
        raise SandboxError(f"docker: policy log of {box.name}: {exc}") from None
