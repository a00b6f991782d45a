"""`sbx secret` calls: sandbox-scoped custom secrets, set, listed and removed in the
installed version's grammar.

Before 0.38 `secret set-custom` takes the value only as `--value` (argv: visible in the
host's process list, so the runtime warns with `VALUE_IN_ARGV` to use a trusted host);
from 0.38 it reads stdin. Listing is two text tables before 0.38 (`parse_custom_table`),
`--json` from 0.38.
"""

from __future__ import annotations

from typing import Any

from bandkit.runtimes.base import SandboxError, Secret, validate_name
from bandkit.runtimes.sbx.cli import Grammar, Rows, SbxCli, parse_json

VALUE_IN_ARGV = (
    "sbx {version}: `secret set-custom` takes the value only as --value, so it is visible "
    "in this host's process list while the call runs; use a trusted host (0.38+ reads stdin)"
)


def set_custom(cli: SbxCli, sandbox: str, secret: Secret) -> None:
    """Store `secret` scoped to `sandbox` (the value on stdin where the grammar allows)."""
    argv = ["secret", "set-custom", *cli.scope(sandbox)]
    for host in secret.hosts:
        argv += ["--host", host]
    argv += ["--env", secret.env, "--placeholder", secret.placeholder]
    if cli.grammar is Grammar.CURRENT:
        cli.run(argv, what="secret set-custom", input=secret.value, redact=[secret.value])
        return
    cli.run([*argv, "--value", secret.value], what="secret set-custom", redact=[secret.value])


def custom_secrets(cli: SbxCli, sandbox: str) -> Rows:
    sandbox = validate_name(sandbox)
    if cli.grammar is Grammar.CURRENT:
        out = cli.run(["secret", "ls", "--sandbox", sandbox, "--json"], what="secret ls")
        rows: Rows = parse_json(out.stdout).get("custom_secrets") or []
        return rows
    return parse_custom_table(cli.run(["secret", "ls", sandbox], what="secret ls").stdout)


def has_secret(cli: SbxCli, sandbox: str, host: str) -> bool:
    return any(
        row["scope"] == sandbox and host in row["targets"] for row in custom_secrets(cli, sandbox)
    )


def remove_secret(cli: SbxCli, sandbox: str, host: str, placeholder: str) -> None:
    cli.run(
        ["secret", "rm", *cli.scope(sandbox), "--placeholder", placeholder, "-f"],
        what="secret rm",
    )
    if has_secret(cli, sandbox, host):
        raise SandboxError(f"sbx secret rm: a secret for {host} in {sandbox} is still listed")


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
