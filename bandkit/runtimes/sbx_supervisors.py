"""The sbx runtime's supervisors (0.43+): one detached `sbx run --name N` per sandbox.

From 0.43 sbx stops a sandbox that has no attached session after about a minute, and a
current-shape kit's entrypoint runs only while one is attached. The process itself is
`bandkit.runtimes.supervisor`; this part starts, revives and stops it, records it in the
manifest (a `process` entry whose key is its tag) and reads its attach log.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from bandkit.fsio import UnsafePathError, read_regular
from bandkit.manifest import Kind, Resource
from bandkit.runtimes import supervisor
from bandkit.runtimes.base import SandboxError, validate_name
from bandkit.runtimes.sbx_cli import SbxCli

SUPERVISE_FROM = (0, 43, 0)  # unattached sandboxes auto-stop (docs/sbx-cli.md 1.1)
SUPERVISOR_SERVICE = "sbx-supervisor"


class SbxSupervisors(SbxCli):
    """Supervisor handling (a part of `SbxRuntime`, which sets the two attributes)."""

    supervisors_dir: Path  # supervisor pid files and attach logs
    _supervise: bool | None  # None: from the version (tests turn it off)

    @property
    def supervised(self) -> bool:
        """Whether sandboxes need a held `sbx run` to keep running (0.43+)."""
        if self._supervise is not None:
            return self._supervise
        return self.version >= SUPERVISE_FROM

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

    def _forget_attach_log(self, name: str) -> None:
        """The supervisor's files go with the sandbox (a directory we made)."""
        shutil.rmtree(self.supervisors_dir / validate_name(name), ignore_errors=True)
