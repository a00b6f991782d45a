"""The sbx CLI as the runtime calls it: the binary, the installed version (read once) and its
grammar, the argv runner, and the JSON reader (output behind daemon-start lines).

Grammar by version (docs/sbx-cli.md has the facts behind it):

| | 0.32-0.37 (LEGACY) | 0.38+ (CURRENT) |
|---|---|---|
| secret scope | positional `NAME` / `-g` | `--sandbox NAME` |
| set-custom value | `--value` only: argv (trusted-host caveat, warned) | stdin |
| secret listing | two text tables | `secret ls --sandbox N --json` |
| `rm` | leaves scoped secrets (removed here explicitly) | removes them (before 0.40: not) |
| policy | global by default, `--sandbox S` only for an existing sandbox | same |

Every call to sbx goes through one `SbxCli` (`SbxCli.run`).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from bandkit.runtimes.base import SandboxError, run_tool, validate_name

MIN_VERSION = (0, 32, 0)
CURRENT_FROM = (0, 38, 0)
T_QUICK = 60.0
T_CREATE = 600.0
T_EXEC = 120.0

Rows = list[dict[str, Any]]


class Grammar(StrEnum):
    LEGACY = "legacy"
    CURRENT = "current"


def parse_version(text: str) -> tuple[int, int, int]:
    match = re.search(r"v?(\d+)\.(\d+)\.(\d+)", text.splitlines()[0] if text else "")
    if not match:
        raise SandboxError(f"sbx: cannot read a version from `sbx version` output {text[:80]!r}")
    major, minor, patch = (int(g) for g in match.groups())
    return major, minor, patch


def parse_json(text: str) -> Any:
    """JSON output, skipping daemon-start lines printed before it."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.lstrip().startswith("{"):
            return json.loads("\n".join(lines[index:]))
    raise SandboxError(f"sbx: expected JSON output, got {text[:120]!r}")


class SbxCli:
    """The sbx binary in the installed version's grammar."""

    def __init__(self, binary: str = "sbx") -> None:
        self.binary = binary
        self._version: tuple[int, int, int] | None = None

    @property
    def version(self) -> tuple[int, int, int]:
        if self._version is None:
            out = self.run(["version"], what="version").stdout
            self._version = parse_version(out)
            if self._version < MIN_VERSION:
                raise SandboxError(
                    f"sbx {'.'.join(map(str, self._version))} is too old: need 0.32 or newer "
                    "(`brew upgrade docker/tap/sbx`)"
                )
        return self._version

    @property
    def grammar(self) -> Grammar:
        return Grammar.CURRENT if self.version >= CURRENT_FROM else Grammar.LEGACY

    def run(
        self,
        args: Sequence[str],
        *,
        what: str,
        timeout: float = T_QUICK,
        input: str | None = None,
        redact: Sequence[str] = (),
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        return run_tool(
            [self.binary, *args],
            what=f"sbx {what}",
            timeout=timeout,
            input=input,
            redact=redact,
            check=check,
        )

    def scope(self, sandbox: str) -> list[str]:
        """The argv naming sandbox `sandbox` as a secret's scope."""
        sandbox = validate_name(sandbox)
        return ["--sandbox", sandbox] if self.grammar is Grammar.CURRENT else [sandbox]
