"""The sbx CLI as the runtime calls it: the installed version (read once) and its grammar,
the argv runner, and the output and input helpers (JSON behind daemon-start lines, the
0600 env file `sbx exec --env-file` reads).

`SbxCli` is the base the `sbx` runtime's parts share (`bandkit.runtimes.sbx`): everything
that calls sbx goes through its `_run`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from bandkit.manifest import Manifest
from bandkit.runtimes.base import Runtime, SandboxError, run_tool, validate_name

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


def installed() -> bool:
    return shutil.which("sbx") is not None


@contextlib.contextmanager
def env_file(env: Mapping[str, str]) -> Iterator[Path | None]:
    """A 0600 `KEY=VALUE` file for `sbx exec --env-file`, removed afterwards (None if empty)."""
    if not env:
        yield None
        return
    for key, value in env.items():
        if "\n" in value or "\n" in key or "=" in key:
            raise SandboxError(f"sbx: exec env {key!r}: names and values must be single-line")
    fd, raw = tempfile.mkstemp(prefix="bandkit-exec-", suffix=".env")  # created 0600
    path = Path(raw)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(f"{key}={value}\n" for key, value in env.items())
        yield path
    finally:
        path.unlink(missing_ok=True)


class SbxCli(Runtime):
    """The sbx binary in the installed version's grammar (abstract: see `SbxRuntime`)."""

    def __init__(self, *, manifest: Manifest | None = None, binary: str = "sbx") -> None:
        super().__init__(manifest=manifest)
        self.binary = binary
        self._version: tuple[int, int, int] | None = None

    @property
    def version(self) -> tuple[int, int, int]:
        if self._version is None:
            out = self._run(["version"], what="version").stdout
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

    def _run(
        self,
        args: Sequence[str],
        *,
        what: str,
        timeout: float = T_QUICK,
        input: str | None = None,
        redact: Sequence[str] = (),
        check: bool = True,
    ) -> Any:
        return run_tool(
            [self.binary, *args],
            what=f"sbx {what}",
            timeout=timeout,
            input=input,
            redact=redact,
            check=check,
        )

    def _scope(self, sandbox: str) -> list[str]:
        sandbox = validate_name(sandbox)
        return ["--sandbox", sandbox] if self.grammar is Grammar.CURRENT else [sandbox]
