"""The docker runtime's base: the docker binary, the box directory, the env file.

`DockerCli` is the class the parts of `DockerRuntime` share (abstract: see `DockerRuntime`,
whose constructor sets the attributes declared here). `_docker` runs the binary (argv only,
never a shell); `_box` is the sandbox's host-side directory; `_env_file` is the 0600 file
`docker create` reads the environment from, so no value is ever in argv.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bandkit.runtimes import hostguard
from bandkit.runtimes.base import ExecResult, Runtime, SandboxError, run_tool, validate_name
from bandkit.runtimes.keychain import Keychain

T_QUICK = 60.0
T_CREATE = 300.0


class DockerCli(Runtime):
    """The docker binary and the sandbox boxes (a part of `DockerRuntime`, which sets
    the attributes)."""

    host_firewall: bool  # False: the operator's warned opt-out
    firewall: hostguard.Tools
    run_dir: Path
    binary: str
    key_in_container: frozenset[str]
    run_id: str  # labels what this run creates
    keychain: Keychain

    def _docker(
        self, *args: str, what: str, timeout: float = T_QUICK, check: bool = True
    ) -> ExecResult:
        result = run_tool([self.binary, *args], what=f"docker {what}", timeout=timeout, check=check)
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def _box(self, name: str) -> Path:
        return self.run_dir / "docker" / validate_name(name)


class _env_file:
    """A 0600 env file that exists only while `docker create` reads it."""

    def __init__(self, env: Mapping[str, str]) -> None:
        for key, value in env.items():
            if "\n" in value or "\n" in key:
                raise SandboxError(f"docker: env {key} must be a single line")
        self.env = env
        self.path = ""

    def __enter__(self) -> str:
        fd, self.path = tempfile.mkstemp(prefix="bandkit-env-", suffix=".env")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.writelines(f"{k}={v}\n" for k, v in self.env.items())
        return self.path

    def __exit__(self, *exc: object) -> None:
        Path(self.path).unlink(missing_ok=True)
