"""`SbxRuntime`: the sandbox lifecycle over the sbx CLI, and the manifest record of what it
adds.

It holds an `SbxCli` (the binary in the installed version's grammar) and calls the parts
with it: `policy`, `secrets`, `templates`, `kits`, `supervisor`. Every resource is recorded
in the manifest here, before the call that makes it, and `removers()` removes each kind.

Names are validated (`validate_name`) before they reach argv. sbx has no labels, so the
proof that a sandbox is ours is its `id` (`sbx ls --json`), recorded in the manifest right
after create: teardown removes a listed sandbox only when its id matches, and keeps (and
reports) a same-named one that does not. An entry without an id (create interrupted
before it was written) falls back to the recorded workspace where `ls` reports one.

From 0.43 sbx stops a sandbox that has no attached session after about a minute, and a
current-shape kit's entrypoint runs only while one is attached. There each sandbox gets a
supervisor (`supervisor`): a detached process holding `sbx run --name N` on a pty, started
after create and on start, stopped before stop and rm, recorded in the manifest (a
`process` entry whose key is its tag) so teardown stops it first. Its output is the
sandbox's startup log (`logs().startup`). Kits are staged in the shape the installed sbx
decodes (`kits`). A kit image built on this host is loaded into sbx's image store first,
once per digest, and recorded so teardown removes it (`templates`).

Secrets live in sbx's store, and a copy of each (the run directory's `runtimes/sbx/
keychain`, 0600, never in the manifest) lets a sandbox be made again under its name:
from 0.40 `sbx rm` deletes the sandbox's scoped secrets, and an agent key cannot be
fetched twice. Removing a secret drops its copy first.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bandkit.fsio import UnsafePathError
from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.runtimes.base import (
    ExecResult,
    Logs,
    Part,
    Runtime,
    RuntimeName,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    Secret,
    env_file,
    validate_name,
)
from bandkit.runtimes.keychain import Keychain
from bandkit.runtimes.sbx import kits, policy, secrets, supervisor, templates
from bandkit.runtimes.sbx.cli import T_CREATE, T_EXEC, Grammar, SbxCli, parse_json

STARTUP_LOG = "/var/log/sbx-kit-startup.log"
DEFAULT_LOG_PATH = "/home/agent/.local/share/band-kit/logs"
SUPERVISE_FROM = (0, 43, 0)  # unattached sandboxes auto-stop (docs/sbx-cli.md 1.1)
SUPERVISOR_SERVICE = "sbx-supervisor"


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
        docker: str = "docker",
        progress: templates.Progress | None = None,
    ) -> None:
        super().__init__(manifest=manifest)
        self.cli = SbxCli(binary)
        self.docker = docker  # where a local kit image comes from (`docker save`)
        self.progress = progress or templates.stderr_progress
        tmp = Path(tempfile.gettempdir())
        # Where kits carrying this run's platform endpoints are staged (private to us).
        self.kits_dir = kits_dir or tmp / f"bandkit-sbx-kits-{os.getuid()}"
        # Supervisor pid files and attach logs: beside the kits of a run dir.
        self.supervisors_dir = supervisors_dir or (
            kits_dir.parent / "supervisors" if kits_dir else tmp / f"bandkit-sbx-sup-{os.getuid()}"
        )
        self._supervise = supervise  # None: from the version (tests turn it off)
        # A copy of each sandbox's secrets, 0600 beside its kits: from 0.40 `sbx rm` takes a
        # sandbox's scoped secrets along, and an agent key is shown once, so making the
        # sandbox again (a fleet update or rollout) re-sets them from here.
        self.keys = Keychain(kits_dir.parent / "keychain") if kits_dir else None
        self._ids: dict[str, str] = {}  # name -> sbx id of the sandboxes created here

    # -- lifecycle
    def create(self, spec: SandboxSpec) -> None:
        name = validate_name(spec.name)
        policy.require_ready(self.cli)
        if name in self.list():
            raise SandboxError(f"sbx: sandbox {name!r} already exists; pick another name")
        kit = self.staged_kit(spec)
        if spec.limits:
            self.warn(f"{spec.name}: resources and placement are not applied on this runtime")
        image = spec.image or (kits.kit_image(kit) if kit else None)
        held = self.ensure_template(image) if image else "pinned"
        for host in spec.egress:
            self.allow(host)
        for secret in spec.secrets:
            self.set_secret(name, secret)
        given = {s.env for s in spec.secrets}
        for kept in self.keys.secrets(name) if self.keys else []:
            if kept.env not in given and not secrets.has_secret(self.cli, name, kept.hosts[0]):
                self.set_secret(name, kept)  # an earlier sandbox of this name took it along
        self.record(Kind.SANDBOX, name, name=name, workspace=str(spec.workspace))
        try:
            self.cli.run(self._create_argv(spec, kit), what="create", timeout=T_CREATE)
        except SandboxError as exc:
            if held != "not-local":
                raise
            raise SandboxError(
                f"{exc}; note: the kit image {image} is neither in this host's Docker nor in "
                "sbx's image store (a local build? `uv run invoke image.build` first)"
            ) from None
        row = self._row(name)
        if row is not None and row.get("id"):
            self._ids[name] = str(row["id"])
            entry = self.manifest.find(Kind.SANDBOX, self.key(name)) if self.manifest else None
            if self.manifest is not None and entry is not None:
                self.manifest.update(entry, id=str(row["id"]))
        if self.supervised:
            self._start_supervisor(name)

    def staged_kit(self, spec: SandboxSpec) -> str | None:
        """The kit to create from, in the shape this sbx decodes and with the sandbox's
        platform env (see `kits`); a kit reference is used as it is, with a warning."""
        if spec.kit is None:
            return None
        return kits.staged_kit(
            spec.kit,
            name=validate_name(spec.name),
            env=spec.env,
            current=self.cli.version >= kits.CURRENT_SHAPE_FROM,
            kits_dir=self.kits_dir,
            warn=self.warn,
        )

    def create_argv(self, spec: SandboxSpec) -> list[str]:
        return self._create_argv(spec, self.staged_kit(spec))

    def _create_argv(self, spec: SandboxSpec, kit: str | None) -> list[str]:
        argv = ["create", "--name", validate_name(spec.name)]
        if kit is None:
            return [*argv, "shell", *map(str, spec.workspaces)]
        if spec.image:
            argv += ["--template", spec.image]
        if self.cli.grammar is Grammar.CURRENT:
            return [*argv, kit, *map(str, spec.workspaces)]
        return [*argv, "--kit", kit, kits.kit_name(kit), *map(str, spec.workspaces)]

    def start(self, name: str) -> None:
        """Start a stopped sandbox (its kit startup commands run again).

        `sbx run --name` would attach an interactive session (a PTY) and block; `exec`
        starts a stopped sandbox first and returns, so a no-op command starts it headless.
        From 0.43 the supervisor then attaches (and runs the entrypoint); a supervisor
        that died is replaced.
        """
        self.cli.run(["exec", validate_name(name), "true"], what="start (exec)", timeout=T_CREATE)
        if self.supervised:
            self._start_supervisor(name)

    def stop(self, name: str) -> None:
        self._stop_supervisor(name)  # first: a held `sbx run` would start it again
        self.cli.run(["stop", validate_name(name)], what="stop")

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
        with env_file("sbx", env or {}) as env_path:
            if env_path is not None:
                args += ["--env-file", str(env_path)]  # values stay out of argv
            result = self.cli.run(
                [*args, name, *argv], what="exec", timeout=timeout, input=stdin, check=False
            )
        return ExecResult(result.returncode, result.stdout, result.stderr)

    def _sandboxes(self) -> list[dict[str, Any]]:
        data = parse_json(self.cli.run(["ls", "--json"], what="ls").stdout)
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
            self._revive_supervisor(name)
        running = row.get("status") == "running"
        return SandboxStatus.RUNNING if running else SandboxStatus.STOPPED

    def list(self) -> list[str]:
        return sorted(str(row["name"]) for row in self._sandboxes())

    def logs(self, name: str) -> Logs:
        name = validate_name(name)
        attached = self._attach_log(name) if self.supervised else None
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
        self._stop_supervisor(name)
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
        self.cli.run(["rm", "-f", name], what="rm")
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

    def parts(self, name: str) -> tuple[Part, ...]:
        """The sandbox and, from 0.43, its supervisor (nothing is revived here: `status`
        would). sbx keeps its own proxies inside its daemon."""
        row = self._row(name)
        listed = "absent" if row is None else str(row.get("status") or "unknown")
        out = [Part("sandbox", listed == "running", listed)]
        if self.supervised:
            pid = supervisor.verified_pid(self.supervisors_dir, name, self.supervisor_tag(name))
            out.append(Part("supervisor", pid is not None, f"pid {pid}" if pid else "stopped"))
        return tuple(out)

    # -- policy, secrets and templates: recorded here, made by the parts
    def allow(self, host: str) -> None:
        """Grant `host` globally unless already allowed; record the rule before adding it."""
        if policy.allowed(self.cli, host):
            return
        self.record(Kind.POLICY, "global", host, host=host)
        policy.allow(self.cli, host)

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
        if self.cli.grammar is Grammar.LEGACY:
            self.warn(secrets.VALUE_IN_ARGV.format(version=".".join(map(str, self.cli.version))))
        secrets.set_custom(self.cli, sandbox, secret)
        if self.keys is not None:
            self.keys.put(sandbox, secret)

    def has_secret(self, sandbox: str, host: str) -> bool:
        kept = self.keys is not None and self.keys.has(validate_name(sandbox), host)
        return kept or secrets.has_secret(self.cli, sandbox, host)

    def remove_secret(self, sandbox: str, host: str, placeholder: str) -> None:
        if self.keys is not None:  # first: the copy never outlives the secret
            self.keys.drop(validate_name(sandbox), host=host)
        secrets.remove_secret(self.cli, sandbox, host, placeholder)

    def stage_images(self, images: Sequence[str]) -> None:
        """Load each local image of `images` into sbx's image store unless it is held there
        (a pinned or remote reference is sbx's to pull); recorded in this runtime's manifest."""
        for image in images:
            self.ensure_template(image)

    def ensure_template(self, image: str) -> str:
        """Make sure sbx holds local image `image` (the rules: `templates`). Returns what
        happened: "pinned", "not-local", "held" or "loaded"."""
        templates.check_ref(image)
        if not templates.is_local_candidate(image):
            return "pinned"
        found = templates.docker_image(self.docker, image)
        if found is None:
            return "not-local"
        image_id, size = found
        if templates.held(self.cli, image, {image_id}) is not None:
            self.progress(
                f"sbx: {image} ({image_id[:19]}) is already in sbx's image store; not loading it"
            )
            return "held"
        self.record(Kind.TEMPLATE, "template", image_id, image=image, id=image_id)
        self.progress(
            f"sbx: loading {image} ({image_id[:19]}, {size / 1e6:.0f} MB) into sbx's image "
            "store: docker save | sbx template load (this can take a minute)"
        )
        entry = templates.load(self.cli, self.docker, image, image_id)
        if self.manifest is not None:
            recorded = self.manifest.find(Kind.TEMPLATE, self.key("template", image_id))
            if recorded is not None:
                self.manifest.update(recorded, listed=str(entry.get("id", "")))
        return "loaded"

    # -- supervisors (0.43+)
    @property
    def supervised(self) -> bool:
        """Whether sandboxes need a held `sbx run` to keep running (0.43+)."""
        if self._supervise is not None:
            return self._supervise
        return self.cli.version >= SUPERVISE_FROM

    def supervisor_tag(self, name: str) -> str:
        """The supervisor's tag, equal to its manifest key (generic removers use it)."""
        where = hashlib.sha256(str(self.supervisors_dir.resolve()).encode()).hexdigest()[:10]
        return self.key("supervisor", validate_name(name), where)

    def _start_supervisor(self, name: str) -> None:
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
            supervisor.spawn(name, directory=self.supervisors_dir, tag=tag, binary=self.cli.binary)
        except (RuntimeError, OSError) as exc:
            raise SandboxError(f"sbx: {exc}") from None

    def _revive_supervisor(self, name: str) -> None:
        """Replace a supervisor that died (its pid file is left: nobody stopped it)."""
        tag = self.supervisor_tag(name)
        pid_file, _ = supervisor.paths(self.supervisors_dir, validate_name(name))
        if pid_file.exists() and supervisor.verified_pid(self.supervisors_dir, name, tag) is None:
            self.warn(f"sbx: the supervisor of {name} had died; started a new one")
            self._start_supervisor(name)

    def _stop_supervisor(self, name: str) -> None:
        tag = self.supervisor_tag(name)
        supervisor.stop(validate_name(name), directory=self.supervisors_dir, tag=tag)

    def _attach_log(self, name: str) -> str | None:
        try:
            return supervisor.attach_log(self.supervisors_dir, validate_name(name))
        except UnsafePathError as exc:
            raise SandboxError(str(exc)) from None

    def _forget_attach_log(self, name: str) -> None:
        """The supervisor's files go with the sandbox (a directory we made)."""
        shutil.rmtree(self.supervisors_dir / validate_name(name), ignore_errors=True)

    # -- removers
    def _remove_secret(self, resource: Resource) -> None:
        details = resource.details
        host = details["hosts"].split(",")[0]
        self.remove_secret(details["sandbox"], host, details["placeholder"])

    def _remove_rule(self, resource: Resource) -> None:
        policy.remove_rule(self.cli, resource.details["host"])

    def _remove_supervisor(self, resource: Resource) -> None:
        details = resource.details
        directory = Path(details["dir"])
        if not directory.is_absolute():
            raise SandboxError(f"{resource.ref}: its dir must be an absolute path")
        supervisor.stop(validate_name(details["name"]), directory=directory, tag=resource.key)

    def _remove_template(self, resource: Resource) -> None:
        details = resource.details
        ids = {d for d in (details.get("id", ""), details.get("listed", "")) if d}
        templates.remove(self.cli, details["image"], ids)

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: self._remove_sandbox,
            Kind.SECRET: self._remove_secret,
            Kind.POLICY: self._remove_rule,
            Kind.PROCESS: self._remove_supervisor,
            Kind.TEMPLATE: self._remove_template,
        }
