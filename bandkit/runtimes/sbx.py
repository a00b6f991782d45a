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

From 0.43 sbx stops a sandbox that has no attached session after about a minute, and a
current-shape kit's entrypoint runs only while one is attached. There each sandbox gets a
supervisor (`bandkit.runtimes.supervisor`): a detached process holding `sbx run --name N`
on a pty, started after create and on start, stopped before stop and rm, recorded in the
manifest (a `process` entry whose key is its tag) so teardown stops it first. Its output is
the sandbox's startup log (`logs().startup`). Kits are staged in the shape the installed
sbx decodes (`bandkit.runtimes.sbxkit`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any

from bandkit.fsio import UnsafePathError, read_regular
from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.runtimes import sbxkit, supervisor
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
SUPERVISE_FROM = (0, 43, 0)  # unattached sandboxes auto-stop (docs/sbx-cli.md 1.1)
SUPERVISOR_SERVICE = "sbx-supervisor"
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
        supervisors_dir: Path | None = None,
        supervise: bool | None = None,
    ) -> None:
        super().__init__(manifest=manifest)
        self.binary = binary
        tmp = Path(tempfile.gettempdir())
        # Where kits carrying this run's platform endpoints are staged (private to us).
        self.kits_dir = kits_dir or tmp / f"bandkit-sbx-kits-{os.getuid()}"
        # Supervisor pid files and attach logs: beside the kits of a run dir.
        self.supervisors_dir = supervisors_dir or (
            kits_dir.parent / "supervisors" if kits_dir else tmp / f"bandkit-sbx-sup-{os.getuid()}"
        )
        self._supervise = supervise  # None: from the version (tests turn it off)
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

    @property
    def supervised(self) -> bool:
        """Whether sandboxes need a held `sbx run` to keep running (0.43+)."""
        if self._supervise is not None:
            return self._supervise
        return self.version >= SUPERVISE_FROM

    # -- supervisors (0.43+)
    def supervisor_tag(self, name: str) -> str:
        """The supervisor's tag, equal to its manifest key (generic removers use it)."""
        where = hashlib.sha256(str(self.supervisors_dir.resolve()).encode()).hexdigest()[:10]
        return self.key("supervisor", validate_name(name), where)

    def supervise(self, name: str) -> None:
        """Start sandbox `name`'s supervisor unless it runs; recorded before it starts."""
        tag = self.supervisor_tag(name)
        if self.manifest is not None:
            self.manifest.record(
                Kind.PROCESS,
                tag,
                runtime=self.name.value,
                service=SUPERVISOR_SERVICE,
                name=name,
                dir=str(self.supervisors_dir),
            )
        try:
            supervisor.spawn(name, directory=self.supervisors_dir, tag=tag, binary=self.binary)
        except (RuntimeError, OSError) as exc:
            raise SandboxError(f"sbx: {exc}") from None

    def revive(self, name: str) -> None:
        """Replace a supervisor that died (its pid file is left: nobody stopped it)."""
        tag = self.supervisor_tag(name)
        pid_file, _ = supervisor.paths(self.supervisors_dir, validate_name(name))
        if pid_file.exists() and supervisor.verified_pid(self.supervisors_dir, name, tag) is None:
            self.warn(f"sbx: the supervisor of {name} had died; started a new one")
            self.supervise(name)

    def unsupervise(self, name: str) -> None:
        tag = self.supervisor_tag(name)
        supervisor.stop(validate_name(name), directory=self.supervisors_dir, tag=tag)

    def _remove_supervisor(self, resource: Resource) -> None:
        details = resource.details
        directory = Path(details["dir"])
        if not directory.is_absolute():
            raise SandboxError(f"{resource.ref}: its dir must be an absolute path")
        supervisor.stop(validate_name(details["name"]), directory=directory, tag=resource.key)

    def attach_log(self, name: str) -> str | None:
        """What the supervisor's `sbx run` printed (the agent's output), None if none."""
        _, log = supervisor.paths(self.supervisors_dir, validate_name(name))
        try:
            return read_regular(log, what="attach log")[0].decode(errors="replace")
        except FileNotFoundError:
            return None
        except UnsafePathError as exc:
            raise SandboxError(str(exc)) from None

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
        if self.supervised:
            self.supervise(name)

    def staged_kit(self, spec: SandboxSpec) -> str | None:
        """The kit to create from, in the shape this sbx decodes and with the sandbox's
        platform env (see `sbxkit`); a kit reference is used as it is, with a warning."""
        if spec.kit is None:
            return None
        return sbxkit.staged_kit(
            spec.kit,
            name=validate_name(spec.name),
            env=spec.env,
            current=self.version >= sbxkit.CURRENT_SHAPE_FROM,
            kits_dir=self.kits_dir,
            warn=self.warn,
        )

    def create_argv(self, spec: SandboxSpec) -> list[str]:
        argv = ["create", "--name", validate_name(spec.name)]
        kit = self.staged_kit(spec)
        if kit is None:
            return [*argv, "shell", *map(str, spec.workspaces)]
        if spec.image:
            argv += ["--template", spec.image]
        if self.grammar is Grammar.CURRENT:
            return [*argv, kit, *map(str, spec.workspaces)]
        return [*argv, "--kit", kit, sbxkit.kit_name(kit), *map(str, spec.workspaces)]

    def start(self, name: str) -> None:
        """Start a stopped sandbox (its kit startup commands run again).

        `sbx run --name` would attach an interactive session (a PTY) and block; `exec`
        starts a stopped sandbox first and returns, so a no-op command starts it headless.
        From 0.43 the supervisor then attaches (and runs the entrypoint); a supervisor
        that died is replaced.
        """
        self._run(["exec", validate_name(name), "true"], what="start (exec)", timeout=T_CREATE)
        if self.supervised:
            self.supervise(name)

    def stop(self, name: str) -> None:
        self.unsupervise(name)  # first: a held `sbx run` would start it again
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
        if self.supervised:
            self.revive(name)
        running = row.get("status") == "running"
        return SandboxStatus.RUNNING if running else SandboxStatus.STOPPED

    def list(self) -> list[str]:
        return sorted(str(row["name"]) for row in self._sandboxes())

    def logs(self, name: str) -> Logs:
        name = validate_name(name)
        attached = self.attach_log(name) if self.supervised else None
        if attached is not None:  # the entrypoint prints to the attached terminal
            running = self.status(name) is SandboxStatus.RUNNING  # exec would start it
            launcher_log = f"{DEFAULT_LOG_PATH}/launcher.log"
            launcher = self.exec(name, ["cat", launcher_log]).stdout if running else ""
            return Logs(startup=attached, launcher=launcher)
        startup = self.exec(name, ["cat", STARTUP_LOG]).stdout
        launcher = self.exec(name, ["cat", f"{DEFAULT_LOG_PATH}/launcher.log"]).stdout
        return Logs(startup=startup, launcher=launcher)

    def remove(self, name: str) -> None:
        """Remove sandbox `name`; one this runtime created must still have its id."""
        self._remove(name, sandbox_id=self._ids.get(validate_name(name), ""))

    def _remove(self, name: str, *, sandbox_id: str = "", workspace: str = "") -> None:
        # The kit copy staged for it is ours either way; so is a supervisor we started.
        shutil.rmtree(self.kits_dir / validate_name(name), ignore_errors=True)
        self.unsupervise(name)
        row = self._row(name)
        if row is None:
            self._forget_attach_log(name)
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
        self._forget_attach_log(name)

    def _forget_attach_log(self, name: str) -> None:
        """The supervisor's files go with the sandbox (a directory we made)."""
        shutil.rmtree(self.supervisors_dir / validate_name(name), ignore_errors=True)

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
            Kind.PROCESS: self._remove_supervisor,
        }


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
