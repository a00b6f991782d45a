"""The docker runtime's network side: the sandbox network, its egress policy, the host firewall.

Each sandbox's internal bridge network has one way out, its egress proxy (`egress`) on
the gateway address: `_rule` and `_platform_rules` make its rules, `allow` adds a grant
(recorded first), `policy_log` reads its decisions. `_address` reads the network's
gateway and subnet; `_guard_host` installs the host firewall chain (`hostguard`) that
lets the bridge reach the host only at the egress proxy's port, and `_remove_firewall`
removes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from bandkit.manifest import Kind, Resource
from bandkit.runtimes import boxnet, egress, hostguard
from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker_cli import DockerCli

PLATFORM_ENV = ("BAND_REST_URL", "BAND_WS_URL")
# Endpoints the egress proxy admits as routes: the platform and the host-set model APIs
# (boxnet proxies both, so a model key is swapped in on the wire like the platform key).
ROUTE_ENV = (*PLATFORM_ENV, *boxnet.LLM_ENVS)
CONTAINER_LOOPBACK = "localhost,127.0.0.1,::1"  # NO_PROXY: the container's own loopback


class DockerNet(DockerCli):
    """Network, egress policy and host firewall (a part of `DockerRuntime`)."""

    def _rule(self, text: str, source: str) -> egress.Rule:
        try:
            return egress.parse_rule(text, source)
        except egress.EgressError as exc:
            raise SandboxError(f"docker: {exc}") from None

    def _platform_rules(self, env: Mapping[str, str]) -> list[egress.Rule]:
        """host:port rules for the platform endpoints in `env` (URLs the runtime made or
        the operator gave, never the workspace's)."""
        rules = []
        for key in ROUTE_ENV:
            parts = urlsplit(env.get(key, ""))
            if parts.hostname and parts.scheme in ("http", "https", "ws", "wss"):
                port = parts.port or (443 if parts.scheme in ("https", "wss") else 80)
                host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
                rules.append(self._rule(f"{host}:{port}", "platform"))
        return rules

    def _address(self, network: str) -> tuple[str, str]:
        """(gateway, subnet) of our network."""
        out = self._docker(
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

    def _guard_host(self, name: str, network: str, gateway: str, port: int) -> None:
        """Firewall the network's bridge to the host but the egress proxy (`hostguard`);
        recorded in the manifest and the box before it is installed. Fails closed."""
        if not self.host_firewall:
            self.warn(hostguard.DISABLED.format(name=name))
            return
        try:
            network_id, bridge = hostguard.network_facts(self.binary, network)
            guard = hostguard.Guard(self.run_id, network_id, bridge, gateway, port)
            facts = {"owner": self.run_id, "chain": guard.chain, "bridge": bridge}
            self.record(Kind.SANDBOX, name, "firewall", name=name, part="firewall", **facts)
            hostguard.write_record(self._box(name), guard)
            hostguard.install(guard, self.firewall)
        except hostguard.HostGuardError as exc:
            raise SandboxError(f"docker: {name}: {exc}") from None

    def _remove_firewall(self, owner: str, chain: str) -> None:
        if chain:
            try:
                hostguard.remove(owner, chain, self.firewall)
            except hostguard.HostGuardError as exc:
                raise SandboxError(f"docker: {exc}") from None

    # -- egress policy
    def allow(self, name: str, host: str) -> str:
        """Grant sandbox `name` egress to `host` (a rule: host[:port], *.domain, ...);
        recorded in the manifest before it takes effect. Returns the rule's text."""
        box = self._box(name)
        if not (box / "owner.json").is_file():
            raise SandboxError(f"docker: no sandbox {name!r} was created in {self.run_dir}")
        rule = self._rule(host, "grant")
        self.record(Kind.POLICY, name, "allow", rule.text, sandbox=name, host=rule.text)
        egress.add_grant(box, rule)
        return rule.text

    def policy_log(self, name: str) -> Sequence[dict[str, Any]]:
        """Every allowed and blocked request of sandbox `name`, oldest first."""
        try:
            return egress.read_log(self._box(name))
        except OSError as exc:
            raise SandboxError(f"docker: policy log of {name}: {exc}") from None

    def _remove_grant(self, resource: Resource) -> None:
        egress.remove_grant(self._box(resource.details["sandbox"]), resource.details["host"])
