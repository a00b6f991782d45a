"""The `sbx` runtime: drives the Docker Sandboxes CLI in the installed version's grammar.

`sbx version` is read once. Grammar by version (../shared/reference/sbx-cli.md):

| | 0.32-0.37 (LEGACY) | 0.38+ (CURRENT) |
|---|---|---|
| secret scope | positional `NAME` / `-g` | `--sandbox NAME` |
| set-custom value | `--value` only: argv (trusted-host caveat, warned) | stdin |
| secret listing | two text tables | `secret ls --sandbox N --json` |
| `rm` | leaves scoped secrets (removed here explicitly) | removes them (before 0.40: not) |
| policy | global by default, `--sandbox S` only for an existing sandbox | same |

Policy rules a sandbox needs are granted globally *before* create (a per-sandbox rule
cannot name a sandbox that does not exist yet), only when `policy check` says the host is
not already allowed, and each added rule is recorded so teardown removes only ours.
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

import yaml

from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.runtimes.base import (
    ExecResult,
    Logs,
    Runtime,
    RuntimeName,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    Secret,
    run_tool,
)

MIN_VERSION = (0, 32, 0)
CURRENT_FROM = (0, 38, 0)
RM_DELETES_SECRETS_FROM = (0, 40, 0)
T_QUICK = 60.0
T_CREATE = 600.0
T_EXEC = 120.0
STARTUP_LOG = "/var/log/sbx-kit-startup.log"
DEFAULT_LOG_PATH = "/home/agent/.local/share/band-kit/logs"
VALUE_IN_ARGV = (
    "sbx {version}: `secret set-custom` takes the value only as --value, so it is visible "
    "in this host's process list while the call runs; use a trusted host (0.38+ reads stdin)"
)


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


class SbxRuntime(Runtime):
    name = RuntimeName.SBX

    def __init__(self, *, manifest: Manifest | None = None, binary: str = "sbx") -> None:
        super().__init__(manifest=manifest)
        self.binary = binary
        self._version: tuple[int, int, int] | None = None

    # -- version and grammar
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
        return ["--sandbox", sandbox] if self.grammar is Grammar.CURRENT else [sandbox]

    # -- policy
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

    # -- lifecycle
    def create(self, spec: SandboxSpec) -> None:
        self.policy_ready()
        if spec.name in self.list():
            raise SandboxError(f"sbx: sandbox {spec.name!r} already exists; pick another name")
        for host in spec.egress:
            self.allow(host)
        for secret in spec.secrets:
            self.set_secret(spec.name, secret)
        self.record(Kind.SANDBOX, spec.name, name=spec.name)
        self._run(self.create_argv(spec), what="create", timeout=T_CREATE)

    def create_argv(self, spec: SandboxSpec) -> list[str]:
        argv = ["create", "--name", spec.name]
        if spec.kit is None:
            return [*argv, "shell", *map(str, spec.workspaces)]
        kit = str(Path(spec.kit).resolve()) if Path(spec.kit).exists() else spec.kit
        if spec.image:
            argv += ["--template", spec.image]
        if self.grammar is Grammar.CURRENT:
            return [*argv, kit, *map(str, spec.workspaces)]
        return [*argv, "--kit", kit, kit_name(kit), *map(str, spec.workspaces)]

    def start(self, name: str) -> None:
        """Start a stopped sandbox (its kit startup commands run again).

        `sbx run --name` would attach an interactive session (a PTY) and block; `exec`
        starts a stopped sandbox first and returns, so a no-op command starts it headless.
        """
        self._run(["exec", name, "true"], what="start (exec)", timeout=T_CREATE)

    def stop(self, name: str) -> None:
        self._run(["stop", name], what="stop")

    def exec(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        detach: bool = False,
        timeout: float = T_EXEC,
    ) -> ExecResult:
        args = ["exec"]
        if detach:
            args.append("-d")
        if stdin is not None:
            args.append("-i")
        with _env_file(env or {}) as env_path:
            if env_path is not None:
                args += ["--env-file", str(env_path)]  # values stay out of argv
            result = self._run(
                [*args, name, *argv], what="exec", timeout=timeout, input=stdin, check=False
            )
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def _sandboxes(self) -> list[dict[str, Any]]:
        data = parse_json(self._run(["ls", "--json"], what="ls").stdout)
        rows: list[dict[str, Any]] = data.get("sandboxes") or []
        return rows

    def status(self, name: str) -> SandboxStatus:
        for row in self._sandboxes():
            if row.get("name") == name:
                running = row.get("status") == "running"
                return SandboxStatus.RUNNING if running else SandboxStatus.STOPPED
        return SandboxStatus.ABSENT

    def list(self) -> list[str]:
        return sorted(str(row["name"]) for row in self._sandboxes())

    def logs(self, name: str) -> Logs:
        startup = self.exec(name, ["cat", STARTUP_LOG]).stdout
        launcher = self.exec(name, ["cat", f"{DEFAULT_LOG_PATH}/launcher.log"]).stdout
        return Logs(startup=startup, launcher=launcher)

    def remove(self, name: str) -> None:
        if name not in self.list():
            return
        self._run(["rm", "-f", name], what="rm")
        if name in self.list():
            raise SandboxError(f"sbx rm -f {name} returned 0 but the sandbox is still listed")

    # -- secrets
    def set_secret(self, sandbox: str, secret: Secret) -> None:
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

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: lambda r: self.remove(r.details["name"]),
            Kind.SECRET: self._remove_secret,
            Kind.POLICY: self._remove_rule,
        }


def kit_name(kit: str) -> str:
    """AGENT for `create --kit`: the kit's own name (spec.yaml), or the ref's last segment."""
    spec = Path(kit) / "spec.yaml"
    if spec.is_file():
        data = yaml.safe_load(spec.read_text(encoding="utf-8")) or {}
        if isinstance(data, dict) and data.get("name"):
            return str(data["name"])
    return kit.rstrip("/").rsplit("/", 1)[-1].split("@")[0].split(":")[0]


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


def installed() -> bool:
    return shutil.which("sbx") is not None


@contextlib.contextmanager
def _env_file(env: Mapping[str, str]) -> Iterator[Path | None]:
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
