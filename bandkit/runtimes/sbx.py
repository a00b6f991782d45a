"""The `sbx` runtime: drives the Docker Sandboxes CLI in the installed version's grammar.

`sbx version` is read once. Grammar by version (docs/sbx-cli.md has the facts behind it):

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

Names are validated (`validate_name`) before they reach argv. sbx has no labels, so the
proof that a sandbox is ours is its `id` (`sbx ls --json`), recorded in the manifest right
after create: teardown removes a listed sandbox only when its id matches, and keeps (and
reports) a same-named one that does not. An entry without an id (create interrupted
before it was written) falls back to the recorded workspace where `ls` reports one.
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
    validate_name,
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

    def __init__(
        self,
        *,
        manifest: Manifest | None = None,
        binary: str = "sbx",
        kits_dir: Path | None = None,
    ) -> None:
        super().__init__(manifest=manifest)
        self.binary = binary
        # Where kits carrying this run's platform endpoints are staged (private to us).
        self.kits_dir = kits_dir or Path(tempfile.gettempdir()) / f"bandkit-sbx-kits-{os.getuid()}"
        self._version: tuple[int, int, int] | None = None
        self._ids: dict[str, str] = {}  # name -> sbx id of the sandboxes created here

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
        sandbox = validate_name(sandbox)
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
        name = validate_name(spec.name)
        self.policy_ready()
        if name in self.list():
            raise SandboxError(f"sbx: sandbox {name!r} already exists; pick another name")
        for host in spec.egress:
            self.allow(host)
        for secret in spec.secrets:
            self.set_secret(name, secret)
        self.record(Kind.SANDBOX, name, name=name, workspace=str(spec.workspace))
        self._run(self.create_argv(spec), what="create", timeout=T_CREATE)
        row = self._row(name)
        if row is not None and row.get("id"):
            self._ids[name] = str(row["id"])
            entry = self.manifest.find(Kind.SANDBOX, self.key(name)) if self.manifest else None
            if self.manifest is not None and entry is not None:
                self.manifest.update(entry, id=str(row["id"]))

    def staged_kit(self, spec: SandboxSpec) -> str | None:
        """The kit to create from: a local kit directory is copied with the sandbox's
        platform env (BAND_REST_URL, BAND_WS_URL, ...) added to `environment.variables`, so
        the agent reaches the platform provisioning used whatever the workspace says (the
        VM gets no host env). A kit reference is used as it is, with a warning."""
        if spec.kit is None:
            return None
        source = Path(spec.kit)
        if not source.is_dir():
            if spec.env:
                self.warn(
                    f"kit {spec.kit} is a reference: the sandbox uses its own endpoints "
                    "(band.yaml or the kit's), not the ones provisioning used"
                )
            return spec.kit
        if not spec.env:
            return str(source.resolve())
        self.kits_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        staged = self.kits_dir / validate_name(spec.name)
        if staged.exists():
            shutil.rmtree(staged)
        shutil.copytree(source, staged, symlinks=True)
        spec_file = staged / "spec.yaml"
        data = yaml.safe_load(spec_file.read_text(encoding="utf-8")) or {}
        variables = dict((data.get("environment") or {}).get("variables") or {})
        variables.update(spec.env)
        data.setdefault("environment", {})["variables"] = variables
        spec_file.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return str(staged.resolve())

    def create_argv(self, spec: SandboxSpec) -> list[str]:
        argv = ["create", "--name", validate_name(spec.name)]
        kit = self.staged_kit(spec)
        if kit is None:
            return [*argv, "shell", *map(str, spec.workspaces)]
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
        self._run(["exec", validate_name(name), "true"], what="start (exec)", timeout=T_CREATE)

    def stop(self, name: str) -> None:
        self._run(["stop", validate_name(name)], what="stop")

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
        name = validate_name(name)
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

    def _row(self, name: str) -> dict[str, Any] | None:
        name = validate_name(name)
        return next((row for row in self._sandboxes() if row.get("name") == name), None)

    def status(self, name: str) -> SandboxStatus:
        row = self._row(name)
        if row is None:
            return SandboxStatus.ABSENT
        running = row.get("status") == "running"
        return SandboxStatus.RUNNING if running else SandboxStatus.STOPPED

    def list(self) -> list[str]:
        return sorted(str(row["name"]) for row in self._sandboxes())

    def logs(self, name: str) -> Logs:
        name = validate_name(name)
        startup = self.exec(name, ["cat", STARTUP_LOG]).stdout
        launcher = self.exec(name, ["cat", f"{DEFAULT_LOG_PATH}/launcher.log"]).stdout
        return Logs(startup=startup, launcher=launcher)

    def remove(self, name: str) -> None:
        """Remove sandbox `name`; one this runtime created must still have its id."""
        self._remove(name, sandbox_id=self._ids.get(validate_name(name), ""))

    def _remove(self, name: str, *, sandbox_id: str = "", workspace: str = "") -> None:
        # The kit copy staged for it is ours either way.
        shutil.rmtree(self.kits_dir / validate_name(name), ignore_errors=True)
        row = self._row(name)
        if row is None:
            return
        found = str(row.get("id", ""))
        listed = row.get("workspaces")
        if sandbox_id and found != sandbox_id:
            reason = f"its id is {found!r}, this run created {sandbox_id!r}"
        elif not sandbox_id and workspace and isinstance(listed, list) and workspace not in listed:
            reason = f"its workspaces are {listed}, this run used {workspace!r}"
        else:
            reason = ""
        if reason:
            raise SandboxError(
                f"sbx: sandbox {name!r} exists but was not created by this run ({reason}); "
                "kept it. Remove it yourself if it is yours, then re-run the teardown"
            )
        self._run(["rm", "-f", name], what="rm")
        if self._row(name) is not None:
            raise SandboxError(f"sbx rm -f {name} returned 0 but the sandbox is still listed")

    def _remove_sandbox(self, resource: Resource) -> None:
        details = resource.details
        self._remove(
            details["name"],
            sandbox_id=details.get("id", ""),
            workspace=details.get("workspace", ""),
        )

    # -- secrets
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

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: self._remove_sandbox,
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
