"""The sbx runtime's egress policy side: network rules a sandbox needs.

Rules are granted globally *before* create (a per-sandbox rule cannot name a sandbox that
does not exist yet), only when `policy check` says the host is not already allowed, and
each added rule is recorded so teardown removes only ours.
"""

from __future__ import annotations

from bandkit.manifest import Kind, Resource
from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.sbx_cli import SbxCli, parse_json


class SbxPolicy(SbxCli):
    """`sbx policy` calls (a part of `SbxRuntime`)."""

    def policy_ready(self) -> None:
        if self._run(["policy", "ls"], what="policy ls", check=False).returncode != 0:
            raise SandboxError(
                "sbx: network policy is not initialized; run `sbx policy init balanced` once"
            )

    def allow(self, host: str) -> None:
        """Grant `host` globally unless already allowed; record the rule before adding it."""
        if (
            self._run(
                ["policy", "check", "network", host], what="policy check", check=False
            ).returncode
            == 0
        ):
            return
        self.record(Kind.POLICY, "global", host, host=host)
        self._run(["policy", "allow", "network", host], what="policy allow")

    def _remove_rule(self, resource: Resource) -> None:
        host = resource.details["host"]
        result = self._run(
            ["policy", "rm", "network", "--resource", host], what="policy rm", check=False
        )
        if result.returncode != 0 and self._rule_exists(host):
            raise SandboxError(f"sbx policy rm {host}: {result.stderr.strip()}")

    def _rule_exists(self, host: str) -> bool:
        rules = parse_json(self._run(["policy", "ls", "--json"], what="policy ls").stdout)
        return any(
            r.get("applies_to") in ("(global)", "global", "") and host in r.get("resources", [])
            for r in rules.get("rules") or []
        )
