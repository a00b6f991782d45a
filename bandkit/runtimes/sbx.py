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

The parts, one concern each: `sbx_cli` (version, grammar, the argv runner, JSON and env-file
helpers), `sbx_secrets`, `sbx_policy` and `sbx_supervisors`; `SbxRuntime` (here) adds the
sandbox lifecycle and the removers. The parts' public names are importable from here too.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.runtimes import sbxkit
from bandkit.runtimes.base import (
    ExecResult,
    Logs,
    RuntimeName,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    validate_name,
)
from bandkit.runtimes.sbx_cli import (
    CURRENT_FROM,
    MIN_VERSION,
    T_CREATE,
    T_EXEC,
    T_QUICK,
    Grammar,
    Rows,
    SbxCli,
    env_file,
    installed,
    parse_json,
    parse_version,
)
from bandkit.runtimes.sbx_policy import SbxPolicy
from bandkit.runtimes.sbx_secrets import (
    RM_DELETES_SECRETS_FROM,
    VALUE_IN_ARGV,
    SbxSecrets,
    parse_custom_table,
)
from bandkit.runtimes.sbx_supervisors import SUPERVISE_FROM, SUPERVISOR_SERVICE, SbxSupervisors

__all__ = [
    "CURRENT_FROM",
    "DEFAULT_LOG_PATH",
    "MIN_VERSION",
    "RM_DELETES_SECRETS_FROM",
    "STARTUP_LOG",
    "SUPERVISE_FROM",
    "SUPERVISOR_SERVICE",
    "T_CREATE",
    "T_EXEC",
    "T_QUICK",
    "VALUE_IN_ARGV",
    "Grammar",
    "Rows",
    "SbxCli",
    "SbxRuntime",
    "env_file",
    "installed",
    "parse_custom_table",
    "parse_json",
    "parse_version",
]

STARTUP_LOG = "/var/log/sbx-kit-startup.log"
DEFAULT_LOG_PATH = "/home/agent/.local/share/band-kit/logs"


class SbxRuntime(SbxSecrets, SbxPolicy, SbxSupervisors):
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
        super().__init__(manifest=manifest, binary=binary)
        tmp = Path(tempfile.gettempdir())
        # Where kits carrying this run's platform endpoints are staged (private to us).
        self.kits_dir = kits_dir or tmp / f"bandkit-sbx-kits-{os.getuid()}"
        # Supervisor pid files and attach logs: beside the kits of a run dir.
        self.supervisors_dir = supervisors_dir or (
            kits_dir.parent / "supervisors" if kits_dir else tmp / f"bandkit-sbx-sup-{os.getuid()}"
        )
        self._supervise = supervise  # None: from the version (tests turn it off)
        self._ids: dict[str, str] = {}  # name -> sbx id of the sandboxes created here

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
        with env_file(env or {}) as env_path:
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

    def _remove_sandbox(self, resource: Resource) -> None:
        details = resource.details
        self._remove(
            details["name"],
            sandbox_id=details.get("id", ""),
            workspace=details.get("workspace", ""),
        )

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: self._remove_sandbox,
            Kind.SECRET: self._remove_secret,
            Kind.POLICY: self._remove_rule,
            Kind.PROCESS: self._remove_supervisor,
        }
