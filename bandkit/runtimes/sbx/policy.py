"""`sbx policy` calls: the network rules a sandbox needs.

Rules are granted globally *before* create (a per-sandbox rule cannot name a sandbox that
does not exist yet), only when `policy check` says the host is not already allowed; the
runtime records each rule it adds, so teardown removes only ours.
"""

from __future__ import annotations

from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.sbx.cli import SbxCli, parse_json


def require_ready(cli: SbxCli) -> None:
    """SandboxError unless sbx's network policy is initialized."""
    if cli.run(["policy", "ls"], what="policy ls", check=False).returncode != 0:
        raise SandboxError(
            "sbx: network policy is not initialized; run `sbx policy init balanced` once"
        )


def allowed(cli: SbxCli, host: str) -> bool:
    """Whether the policy already lets sandboxes reach `host`."""
    result = cli.run(["policy", "check", "network", host], what="policy check", check=False)
    return result.returncode == 0


def allow(cli: SbxCli, host: str) -> None:
    """Add a global rule for `host`."""
    cli.run(["policy", "allow", "network", host], what="policy allow")


def remove_rule(cli: SbxCli, host: str) -> None:
    """Remove the global rule for `host`; one already gone is success."""
    result = cli.run(["policy", "rm", "network", "--resource", host], what="policy rm", check=False)
    if result.returncode != 0 and rule_exists(cli, host):
        raise SandboxError(f"sbx policy rm {host}: {result.stderr.strip()}")


def rule_exists(cli: SbxCli, host: str) -> bool:
    rules = parse_json(cli.run(["policy", "ls", "--json"], what="policy ls").stdout)
    return any(
        r.get("applies_to") in ("(global)", "global", "") and host in r.get("resources", [])
        for r in rules.get("rules") or []
    )
