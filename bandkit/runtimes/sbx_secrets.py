"""The sbx runtime's secret side: sandbox-scoped custom secrets, set, listed and removed
in the installed version's grammar.

Before 0.38 `secret set-custom` takes the value only as `--value` (argv: visible in the
host's process list, so a warning says to use a trusted host); from 0.38 it reads stdin.
Listing is two text tables before 0.38 (`parse_custom_table`), `--json` from 0.38.
"""

from __future__ import annotations

from typing import Any

from bandkit.manifest import Kind, Resource
from bandkit.runtimes.base import SandboxError, Secret, validate_name
from bandkit.runtimes.sbx_cli import Grammar, Rows, SbxCli, parse_json

RM_DELETES_SECRETS_FROM = (0, 40, 0)
VALUE_IN_ARGV = (
    "sbx {version}: `secret set-custom` takes the value only as --value, so it is visible "
    "in this host's process list while the call runs; use a trusted host (0.38+ reads stdin)"
)


class SbxSecrets(SbxCli):
    """`sbx secret` calls (a part of `SbxRuntime`)."""

    def set_secret(self, sandbox: str, secret: Secret) -> None:
        sandbox = validate_name(sandbox)
        self.record(
            Kind.SECRET,
            sandbox,
            secret.env,
            sandbox=sandbox,
            hosts=",".join(secret.hosts),
            placeholder=secret.placeholder,
        )
        argv = ["secret", "set-custom", *self._scope(sandbox)]
        for host in secret.hosts:
            argv += ["--host", host]
        argv += ["--env", secret.env, "--placeholder", secret.placeholder]
        if self.grammar is Grammar.CURRENT:
            self._run(argv, what="secret set-custom", input=secret.value, redact=[secret.value])
            return
        self.warn(VALUE_IN_ARGV.format(version=".".join(map(str, self.version))))
        self._run([*argv, "--value", secret.value], what="secret set-custom", redact=[secret.value])

    def custom_secrets(self, sandbox: str) -> Rows:
        sandbox = validate_name(sandbox)
        if self.grammar is Grammar.CURRENT:
            out = self._run(["secret", "ls", "--sandbox", sandbox, "--json"], what="secret ls")
            rows: Rows = parse_json(out.stdout).get("custom_secrets") or []
            return rows
        return parse_custom_table(self._run(["secret", "ls", sandbox], what="secret ls").stdout)

    def has_secret(self, sandbox: str, host: str) -> bool:
        return any(
            row["scope"] == sandbox and host in row["targets"]
            for row in self.custom_secrets(sandbox)
        )

    def remove_secret(self, sandbox: str, host: str, placeholder: str) -> None:
        self._run(
            ["secret", "rm", *self._scope(sandbox), "--placeholder", placeholder, "-f"],
            what="secret rm",
        )
        if self.has_secret(sandbox, host):
            raise SandboxError(f"sbx secret rm: a secret for {host} in {sandbox} is still listed")

    def _remove_secret(self, resource: Resource) -> None:
        host = resource.details["hosts"].split(",")[0]
        self.remove_secret(resource.details["sandbox"], host, resource.details["placeholder"])


def parse_custom_table(text: str) -> list[dict[str, Any]]:
    """The CUSTOM SECRETS table of 0.34/0.35 `secret ls` -> scope/targets/env/placeholder."""
    lines = text.splitlines()
    if "CUSTOM SECRETS" not in lines:
        return []
    rows = []
    for line in lines[lines.index("CUSTOM SECRETS") + 2 :]:
        cells = line.split()
        if len(cells) >= 4:
            rows.append(
                {
                    "scope": cells[0],
                    "targets": cells[1].split(","),
                    "env": cells[2],
                    "placeholder": cells[3],
                }
            )
    return rows
