"""The runtime interface every sandbox backend implements, and its value types.

A runtime records each resource in the run manifest (when it has one) *before* creating
it, and offers `removers()` so `manifest.teardown` can remove what it recorded. Secret
values live only in `Secret.value` (never repr'd) and go to the backend through stdin or
a 0600 file wherever the backend allows; the sbx 0.34/0.35 `--value` caveat is reported
through `warnings`.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from bandkit import tools
from bandkit.errors import BandkitError, conceal
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
    SWARM = "swarm"


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
    """A credential for a sandbox: the sandbox sees `placeholder` in `env`; requests
    carry `value` instead only where the secret is scoped (docker puts `value` itself
    into the container only for a sandbox the operator opted into the env-file tier).

    `scopes` are URL prefixes (scheme, host, port and a path prefix, e.g.
    `http://127.0.0.1:8080/api/v1/agent`; `boxnet.key_scopes` makes them): our credential
    proxy (local, docker, the sbx simulator) swaps the key in only under one of them, and
    with none, nowhere. `hosts` are the host patterns sbx's own proxy scopes it by (its
    `secret set-custom --host` takes host names only) and what `has_secret` looks up.
    """

    env: str
    hosts: tuple[str, ...]
    value: str = field(repr=False)
    placeholder: str = PROXY_MANAGED_PLACEHOLDER
    scopes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        conceal(self.value)  # never in a BANDKIT_DEBUG report either


@dataclass(frozen=True)
class Limits:
    """What a sandbox may use and where it may run, beyond the runtime's defaults (a fleet
    file's resources and placement). Honoured by the docker runtime (cpus, memory) and the
    swarm runtime (all three); the others say they ignore them."""

    cpus: str = ""  # a decimal number of CPUs, e.g. "0.25"; "" = the runtime's default
    memory_bytes: int = 0  # 0 = the runtime's default
    constraints: tuple[str, ...] = ()  # swarm placement constraints, e.g. node.role==worker

    def __bool__(self) -> bool:
        return bool(self.cpus or self.memory_bytes or self.constraints)


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
    limits: Limits = field(default_factory=Limits)
    # docker, swarm: where the first workspace appears inside the sandbox (default: its
    # own path). A fleet mounts each agent's copy at its source's path, so one agent
    # image (synced for that path) serves every agent made from the source.
    mount_at: Path | None = None

    @property
    def workspace(self) -> Path:
        return self.workspaces[0]

    def mounts(self) -> list[tuple[Path, Path]]:
        """(host path, path inside the sandbox) of each workspace."""
        inside = [self.mount_at or self.workspace, *self.workspaces[1:]]
        return list(zip(self.workspaces, inside, strict=True))

    @property
    def workspace_inside(self) -> Path:
        """`WORKSPACE_DIR` inside the sandbox."""
        return self.mount_at or self.workspace


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Part:
    """One host-side part of a sandbox (its container or processes, a proxy, a firewall
    chain, a supervisor) and whether it is up, for `kit.status` and `kit.resume`."""

    name: str
    up: bool
    detail: str = ""


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

    def scheduler_report(self, name: str) -> list[str]:
        """What the runtime's scheduler says of its latest attempts to run the sandbox, one
        line each, oldest first (swarm: each task's node, state and error), for the report
        of a sandbox that did not come up; none where no scheduler places sandboxes, or
        when it cannot be asked now (it never raises: it adds to a report of a failure).
        Not part of `logs`: a log is read as it grows, and these lines change in place."""
        return []

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

    def stage_images(self, images: Sequence[str]) -> None:
        """Make `images` ready where this runtime starts sandboxes, ahead of `create` (so a
        sandbox replaced by one of them is down only while it restarts; a cluster moves
        them together, their shared layers once). One host: nothing."""
        return

    def where(self, name: str) -> str:
        """Which machine runs sandbox `name`: this host, unless a cluster says otherwise."""
        return "this host"

    def parts(self, name: str) -> tuple[Part, ...]:
        """Each part of sandbox `name` and whether it is up; changes nothing. By default
        the sandbox itself; runtimes with host-side parts list those too."""
        status = self.status(name)
        return (Part("sandbox", status is SandboxStatus.RUNNING, status.value),)

    def resume(self, name: str) -> tuple[Part, ...]:
        """Bring back every part of sandbox `name` that is down (after a reboot, a
        daemon restart, a killed proxy); idempotent: nothing is touched when all are up.
        Returns the parts that were down. By default `start`, which each runtime makes
        bring back its parts."""
        down = tuple(part for part in self.parts(name) if not part.up)
        if down:
            self.start(name)
        return down


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
    """A runtime's CLI call: `tools.run` raising SandboxError."""
    return tools.run(
        argv,
        what=what,
        timeout=timeout,
        input=input,
        env=env,
        check=check,
        redact=redact,
        error=SandboxError,
    )


@contextlib.contextmanager
def env_file(tool: str, env: Mapping[str, str]) -> Iterator[Path | None]:
    """A 0600 `KEY=VALUE` file for `TOOL ... --env-file`, removed afterwards (None if
    `env` is empty): values never go into argv."""
    if not env:
        yield None
        return
    for key, value in env.items():
        if "\n" in value or "\n" in key or "=" in key:
            raise SandboxError(f"{tool}: env {key!r}: names and values must be single-line")
    fd, raw = tempfile.mkstemp(prefix="bandkit-env-", suffix=".env")  # created 0600
    path = Path(raw)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.writelines(f"{key}={value}\n" for key, value in env.items())
        yield path
    finally:
        path.unlink(missing_ok=True)
