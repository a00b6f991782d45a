"""The `local` runtime: each sandbox is a `hostbox` (host processes running the launcher).

No isolation: the agent runs on this host as the agent uid (as root) or as you. For
development and fast tests. Layout under `run_dir`:

    sandboxes/<name>/sandbox.json   workspaces and plain env (no secret values)
    boxes/<name>/                   the hostbox root (runtime dirs, startup.log); boxes
                                    share boxes/.sdk (as root) and boxes/.uv-cache

As root the agent runs as uid 1000, which must traverse every directory above its box. A
run directory it cannot reach (the local platform's `.run` is 0700: it holds keys, and so
does pytest's tmp) gets its boxes under `BOXES_HOME/<digest of the run dir>` instead; the
stored keys stay in the private run directory.
    keychain/<name>.json            0600: the sandbox-scoped secrets (`keychain`, the only
                                    place a value is stored); the credential proxy uses them

Secrets behave as with sbx: scoped to a name, storable before the sandbox exists, seen
inside only as their placeholder, swapped in on the wire by the credential proxy.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bandkit.fsio import UnsafePathError, read_regular, write_private
from bandkit.manifest import Kind, Manifest, Remover, Resource
from bandkit.runtimes import boxnet, hostbox
from bandkit.runtimes.base import (
    ExecResult,
    Logs,
    RuntimeName,
    SandboxError,
    SandboxSpec,
    SandboxStatus,
    validate_name,
)
from bandkit.runtimes.keychain import Keychain, KeychainSecrets

NO_ISOLATION = (
    "local runtime: no isolation; the agent runs as a host process with this host's "
    "network and filesystem (use sbx or docker for untrusted code)"
)


BOXES_HOME = Path("/var/lib/bandkit/local-boxes")


def _others_can_traverse(path: Path) -> bool:
    """True when every directory from / down to `path` (as far as it exists) is o+x."""
    for directory in (*reversed(path.absolute().parents), path.absolute()):
        try:
            if not directory.stat().st_mode & stat.S_IXOTH:
                return False
        except FileNotFoundError:
            return True  # made later with 0755 by create()
    return True


class LocalRuntime(KeychainSecrets):
    name = RuntimeName.LOCAL

    def __init__(self, run_dir: Path, *, manifest: Manifest | None = None) -> None:
        super().__init__(manifest=manifest)
        self.run_dir = Path(run_dir)
        self.keychain = Keychain(self.run_dir / "keychain")
        self.warn(NO_ISOLATION)

    # -- paths and stored state
    # Every name is validated before it is joined into a path (`../..` never reaches
    # an rmtree) or handed on.
    def _dir(self, name: str) -> Path:
        return self.run_dir / "sandboxes" / validate_name(name)

    def _box(self, name: str) -> Path:
        # Boxes share a parent so they share the SDK home and uv cache kept beside them.
        return self.boxes_root() / validate_name(name)

    def boxes_root(self) -> Path:
        """Where this run directory's boxes live (see the module docstring)."""
        inside = self.run_dir / "boxes"
        if os.geteuid() != 0 or _others_can_traverse(self.run_dir):
            return inside
        digest = hashlib.sha256(str(self.run_dir.resolve()).encode()).hexdigest()[:16]
        return BOXES_HOME / digest

    def _meta(self, name: str) -> dict[str, Any]:
        path = self._dir(name) / "sandbox.json"
        if not path.is_file():
            raise SandboxError(f"local: sandbox {name!r} does not exist")
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def _env_and_injections(self, name: str) -> tuple[dict[str, str], list[boxnet.Injection]]:
        env = dict(self._meta(name)["env"])
        injections = []
        for secret in self.keychain.secrets(name):
            env[secret.env] = secret.placeholder
            injections.append(boxnet.Injection(secret.hosts, secret.placeholder, secret.value))
        return env, injections

    # -- lifecycle
    def create(self, spec: SandboxSpec) -> None:
        if self._dir(spec.name).exists():
            raise SandboxError(f"local: sandbox {spec.name!r} already exists; remove it first")
        for secret in spec.secrets:
            self.set_secret(spec.name, secret)
        self.record(Kind.SANDBOX, spec.name, name=spec.name, path=str(self._dir(spec.name)))
        self.run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        self._dir(spec.name).mkdir(mode=0o700, parents=True)
        boxes = self.boxes_root()
        boxes.mkdir(mode=0o755, parents=True, exist_ok=True)
        for path in (boxes, *(p for p in boxes.parents if p.is_relative_to(BOXES_HOME.parent))):
            os.chmod(path, 0o755)  # noqa: S103 - the agent uid must traverse it
        meta = {
            "workspaces": [str(p) for p in spec.workspaces],
            "env": dict(spec.env),
            "ca_pem": spec.ca_cert_pem or "",
        }
        write_private(self._dir(spec.name) / "sandbox.json", json.dumps(meta))
        self.start(spec.name)

    def start(self, name: str) -> None:
        meta = self._meta(name)
        env, injections = self._env_and_injections(name)
        try:
            hostbox.start(
                self._box(name),
                workspace=Path(meta["workspaces"][0]),
                env=env,
                injections=injections,
                ca_pem=meta.get("ca_pem") or None,
            )
        except hostbox.BoxError as exc:
            raise SandboxError(f"local: start {name}: {exc}") from None

    def stop(self, name: str) -> None:
        self._meta(name)
        hostbox.stop(self._box(name))

    def exec(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdin: str | None = None,
        detach: bool = False,
        timeout: float = 120,
    ) -> ExecResult:
        meta = self._meta(name)
        if self.status(name) is SandboxStatus.STOPPED:
            self.start(name)  # like sbx: a stopped sandbox is started first
        box_env, _ = self._env_and_injections(name)
        result = hostbox.run_command(
            self._box(name),
            argv,
            env={**box_env, **(env or {})},
            workspace=Path(meta["workspaces"][0]),
            stdin=stdin if stdin is not None else "",
            detach=detach,
            capture=True,
            timeout=timeout,
        )
        return ExecResult(result.returncode, result.stdout or "", result.stderr or "")

    def status(self, name: str) -> SandboxStatus:
        if not (self._dir(name) / "sandbox.json").is_file():
            return SandboxStatus.ABSENT
        running = hostbox.status(self._box(name)) == "running"
        return SandboxStatus.RUNNING if running else SandboxStatus.STOPPED

    def logs(self, name: str) -> Logs:
        box = self._box(name)
        return Logs(
            startup=_read(box / "startup.log"), launcher=_read(box / "logs" / "launcher.log")
        )

    def remove(self, name: str) -> None:
        hostbox.stop(self._box(name))
        for path in (self._box(name), self._dir(name)):
            if path.is_symlink():
                path.unlink()
            elif path.exists():
                shutil.rmtree(path)

    def list(self) -> list[str]:
        root = self.run_dir / "sandboxes"
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (p / "sandbox.json").is_file())

    # -- secrets: `KeychainSecrets`

    def _remove_secret_entry(self, resource: Resource) -> None:
        sandbox = validate_name(resource.details["sandbox"])
        self.keychain.drop(sandbox, env=resource.key.rsplit("/", 1)[1])

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: lambda r: self.remove(r.details["name"]),
            Kind.SECRET: self._remove_secret_entry,
        }


def _read(path: Path) -> str:
    """A log the agent wrote, read without following a link it may have planted there."""
    try:
        data, _ = read_regular(path, what="log")
    except FileNotFoundError:
        return ""
    except (UnsafePathError, OSError) as exc:
        return f"(not read: {exc})\n"
    return data.decode("utf-8", errors="replace")
