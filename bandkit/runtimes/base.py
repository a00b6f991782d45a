"""The runtime interface every sandbox backend implements, and its value types.

A runtime records each resource in the run manifest (when it has one) *before* creating
it, and offers `removers()` so `manifest.teardown` can remove what it recorded. Secret
values live only in `Secret.value` (never repr'd) and go to the backend through stdin or
a 0600 file wherever the backend allows; the sbx 0.34/0.35 `--value` caveat is reported
through `warnings`.
"""

from __future__ import annotations

import os
import re
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from bandkit.errors import BandkitError
from bandkit.manifest import Kind, Manifest, Remover

PROXY_MANAGED_PLACEHOLDER = "proxy-managed"  # == launcher.constants.PROXY_MANAGED (tested)
# A sandbox name is joined into host paths (run dirs, keychain files, box roots) and put
# into CLI argv (docker, sbx): lower-case letters, digits and `-`, starting alphanumeric,
# at most 63 characters (one DNS label), so it can never be `..`, a path or an option.
SANDBOX_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,62}")


class RuntimeName(StrEnum):
    LOCAL = "local"
    SBX = "sbx"
    DOCKER = "docker"


class SandboxStatus(StrEnum):
    RUNNING = "running"
    STOPPED = "stopped"
    ABSENT = "absent"


class SandboxError(BandkitError):
    """A runtime operation failed; the message names the operation and is safe to log."""


def validate_name(name: object) -> str:
    """`name` when it is a valid sandbox name; SandboxError otherwise.

    Every runtime calls this before a name reaches a path join or a command line.
    """
    if not isinstance(name, str) or SANDBOX_NAME.fullmatch(name) is None:
        shown = repr(name)[:80]
        raise SandboxError(
            f"invalid sandbox name {shown}: use 1-63 lower-case letters, digits and '-', "
            "starting with a letter or digit (e.g. my-agent)"
        )
    return name


@dataclass(frozen=True)
class Secret:
    """A credential for a sandbox: the sandbox sees `placeholder` in `env`; requests to
    `hosts` carry `value` instead (docker puts `value` itself into the container only
    for a sandbox the operator opted into the env-file tier)."""

    env: str
    hosts: tuple[str, ...]
    value: str = field(repr=False)
    placeholder: str = PROXY_MANAGED_PLACEHOLDER


@dataclass(frozen=True)
class SandboxSpec:
    name: str
    workspaces: tuple[Path, ...]
    kit: str | None = None  # sbx: kit dir or reference (AGENT = the kit's name)
    image: str | None = None  # docker: image; sbx: --template
    env: Mapping[str, str] = field(default_factory=dict)
    secrets: tuple[Secret, ...] = ()
    egress: tuple[str, ...] = ()  # host or host:port the sandbox must reach
    ca_cert_pem: str | None = None  # the platform's CA when it uses TLS (PROXY_CA_CERT_B64)

    @property
    def workspace(self) -> Path:
        return self.workspaces[0]


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Logs:
    startup: str  # the kit startup log (the agent's stdout/stderr)
    launcher: str  # runtime.logPath/launcher.log


class Runtime(ABC):
    """create/start/stop/exec/status/logs/remove/list over one backend."""

    name: RuntimeName

    def __init__(self, *, manifest: Manifest | None = None) -> None:
        self.manifest = manifest
        self.warnings: list[str] = []

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def key(self, *parts: str) -> str:
        return "/".join([self.name.value, *parts])

    def record(self, kind: Kind, *parts: str, **details: str) -> None:
        if self.manifest is not None:
            self.manifest.record(kind, self.key(*parts), runtime=self.name.value, **details)

    @abstractmethod
    def create(self, spec: SandboxSpec) -> None: ...

    @abstractmethod
    def start(self, name: str) -> None: ...

    @abstractmethod
    def stop(self, name: str) -> None: ...

    @abstractmethod
    def exec(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        detach: bool = False,
        timeout: float = 120,
    ) -> ExecResult: ...

    @abstractmethod
    def status(self, name: str) -> SandboxStatus: ...

    @abstractmethod
    def logs(self, name: str) -> Logs: ...

    @abstractmethod
    def remove(self, name: str) -> None:
        """Remove the sandbox and what it owns; absent is success."""

    @abstractmethod
    def list(self) -> list[str]: ...

    @abstractmethod
    def set_secret(self, sandbox: str, secret: Secret) -> None:
        """Store a sandbox-scoped secret (allowed before the sandbox exists)."""

    @abstractmethod
    def has_secret(self, sandbox: str, host: str) -> bool: ...

    @abstractmethod
    def remove_secret(self, sandbox: str, host: str, placeholder: str) -> None: ...

    @abstractmethod
    def removers(self) -> dict[Kind, Remover]:
        """Removers for the kinds this runtime records (used by `manifest.teardown`)."""


def run_tool(
    argv: Sequence[str],
    *,
    what: str,
    timeout: float,
    input: str | None = None,
    redact: Sequence[str] = (),
    check: bool = True,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a CLI (argv list, timeout); on failure raise SandboxError with secrets redacted.

    `env` is added to this process's environment for the child: values a CLI can read from
    its environment (docker's `--env NAME`) go there, never into argv.
    """

    def clean(text: str) -> str:
        for secret in redact:
            if secret:
                text = text.replace(secret, "***")
        return text

    try:
        result = subprocess.run(
            list(argv),
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            env={**os.environ, **env} if env else None,
        )
    except subprocess.TimeoutExpired:
        raise SandboxError(
            f"{what}: `{clean(' '.join(argv))}` timed out after {timeout}s"
        ) from None
    except FileNotFoundError:
        raise SandboxError(f"{what}: {argv[0]} is not installed or not on PATH") from None
    if check and result.returncode != 0:
        detail = clean((result.stderr or result.stdout or "").strip())
        raise SandboxError(
            f"{what}: `{clean(' '.join(argv))}` failed (exit {result.returncode}): {detail}"
        )
    return subprocess.CompletedProcess(
        result.args, result.returncode, clean(result.stdout), clean(result.stderr)
    )
