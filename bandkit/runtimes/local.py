"""The `local` runtime: each sandbox is a `hostbox` (host processes running the launcher).

No sandbox: the agent runs on this host, with its network. For development and fast
tests. As root each box runs as a uid of its own (`boxuids`), leased and recorded in the
run manifest (the sandbox entry's `uid`) and in `sandbox.json` before it is first used:
boxes cannot read each other's environment or files, and teardown ends every process of
that uid. As another user every box runs as you: no isolation between them either.
Layout under `run_dir`:

    sandboxes/<name>/sandbox.json   workspaces, plain env and the box uid (no secret values)
    boxes/<name>/                   the hostbox root (runtime dirs, startup.log); boxes
                                    share boxes/.sdk (as root, read-only to them)
    boxes/.uv-cache/<name>/         the box's own uv cache (0700, its uid's): a copy of the
                                    machine's seed when new, kept for the next box of that
                                    name, root's in between (parked), so no other box (nor
                                    the next holder of the uid) reads it
    keychain/<name>.json            0600: the sandbox-scoped secrets (`keychain`, the only
                                    place a value is stored); the credential proxy uses them

As root the box uid must traverse every directory above its box. A run directory it
cannot reach (the local platform's `.run` is 0700: it holds keys, and so does pytest's
tmp) gets its boxes under `BOXES_HOME/<digest of the run dir>` instead; the stored keys
stay in the private run directory. Such a boxes root records the run directory it serves
(`OWNER`, root's); when a box is created, any other root there that holds no box (only
caches and the SDK home, all made again on demand) and whose run directory is gone, or
that has no record (an earlier version's), is removed: deleted clones and test runs do not
pile up caches under `BOXES_HOME`.
A workspace it cannot reach (a clone under /root) is staged into the box at each start
(`boxworkspace`).

Secrets behave as with sbx: scoped to a name, storable before the sandbox exists, seen
inside only as their placeholder, swapped in on the wire by the credential proxy.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from bandkit import processes
from bandkit.fsio import UnsafePathError, closed_to_others, own_dir, read_regular, write_private
from bandkit.manifest import Kind, Manifest, Remover
from bandkit.runtimes import boxnet, boxuids, hostbox
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
    validate_name,
)
from bandkit.runtimes.keychain import Secrets

UID_PER_BOX = (
    "local runtime: no isolation from this host; the agent runs as a host process with "
    "this host's network and every file others may read, as a uid of its own (boxes "
    "cannot read each other's environment, processes or files); use sbx or docker for "
    "untrusted code"
)
SHARED_UID = (
    "local runtime: no isolation; not running as root, so every box runs as you (uid {uid}) "
    "with this host's network and your files, and boxes can read each other's environment "
    "(proxy tokens), processes and files; use sbx or docker for untrusted code (as root, "
    "each local box gets a uid of its own)"
)


BOXES_HOME = Path("/var/lib/bandkit/local-boxes")
CACHES = ".uv-cache"  # beside the boxes: <name>/, each box's own (hostbox.hand_over, park)
OWNER = ".run-dir"  # in a root under BOXES_HOME: the run directory it serves (a line)
HOME_LOCK = ".lock"  # in BOXES_HOME: held while a root is made or the orphans are swept
HOME_LOCK_TIMEOUT_S = 60.0


class LocalRuntime(Runtime):
    name = RuntimeName.LOCAL

    def __init__(self, run_dir: Path, *, manifest: Manifest | None = None) -> None:
        super().__init__(manifest=manifest)
        self.run_dir = Path(run_dir)
        self.secrets = Secrets(self.run_dir / "keychain", self.record)
        self.warn(UID_PER_BOX if boxuids.isolated() else SHARED_UID.format(uid=os.getuid()))

    # -- paths and stored state
    # Every name is validated before it is joined into a path (`../..` never reaches
    # an rmtree) or handed on.
    def _dir(self, name: str) -> Path:
        return self.run_dir / "sandboxes" / validate_name(name)

    def _box(self, name: str) -> Path:
        # Boxes share a parent so they share the SDK home kept beside them (read-only).
        return self.boxes_root() / validate_name(name)

    def _cache(self, name: str) -> Path:
        """The box's own uv cache, kept for the next box of that name (parked between)."""
        return self.boxes_root() / CACHES / validate_name(name)

    def boxes_root(self) -> Path:
        """Where this run directory's boxes live (see the module docstring)."""
        inside = self.run_dir / "boxes"
        if os.geteuid() != 0 or not closed_to_others(self.run_dir):
            return inside
        digest = hashlib.sha256(str(self.run_dir.resolve()).encode()).hexdigest()[:16]
        return BOXES_HOME / digest

    def make_boxes_root(self) -> Path:
        """The boxes root, made or taken only as ours (0755: the box uids traverse it), and
        the uv caches directory in it (0711 as root: each box enters its own cache below,
        none may list the others). A root under `BOXES_HOME` is claimed for the run
        directory (made first, then recorded in the root) and sweeps the orphans there;
        anything put in a root is put after this."""
        self.run_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        boxes = self.boxes_root()
        shared = BOXES_HOME.parent
        chain = [boxes]
        if boxes.is_relative_to(shared):
            chain = [*(p for p in reversed(boxes.parents) if p.is_relative_to(shared)), boxes]
        under_home = boxes.parent == BOXES_HOME
        swept: list[Path] = []
        try:
            for path in chain[:-1]:  # BOXES_HOME and what leads to it: checked before its lock
                own_dir(path, mode=0o755, what="the local runtime's boxes directory", parents=True)
            with _home_locked() if under_home else contextlib.nullcontext():
                own_dir(boxes, mode=0o755, what="the local runtime's boxes directory", parents=True)
                caches_mode = 0o711 if os.geteuid() == 0 else 0o700
                own_dir(boxes / CACHES, mode=caches_mode, what="the local runtime's uv caches")
                if under_home:
                    served = self.run_dir.resolve()
                    if _recorded_run_dir(boxes) != served:  # once per root, not per box
                        write_private(boxes / OWNER, f"{served}\n")
                    swept = _sweep_orphans(keep=boxes)
        except UnsafePathError as exc:
            raise SandboxError(f"local: {exc}") from None
        if swept:
            self.warn(
                f"local: removed {len(swept)} boxes director{'y' if len(swept) == 1 else 'ies'} "
                f"in {BOXES_HOME} that held only caches, of run directories that no longer "
                "exist (or unrecorded: made by an earlier version)"
            )
        return boxes

    def _meta(self, name: str) -> dict[str, Any]:
        path = self._dir(name) / "sandbox.json"
        if not path.is_file():
            raise SandboxError(f"local: sandbox {name!r} does not exist")
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def _env_and_injections(self, name: str) -> tuple[dict[str, str], list[boxnet.Injection]]:
        env = dict(self._meta(name)["env"])
        injections = []
        for secret in self.secrets.of(name):
            env[secret.env] = secret.placeholder
            injections.append(boxnet.Injection.of(secret))
        return env, injections

    # -- lifecycle
    def create(self, spec: SandboxSpec) -> None:
        if self._dir(spec.name).exists():
            raise SandboxError(f"local: sandbox {spec.name!r} already exists; remove it first")
        self.make_boxes_root()  # before anything is recorded or put there
        if spec.limits:
            self.warn(f"{spec.name}: resources and placement are not applied on this runtime")
        for secret in spec.secrets:
            self.set_secret(spec.name, secret)
        self.record(Kind.SANDBOX, spec.name, name=spec.name, path=str(self._dir(spec.name)))
        self._dir(spec.name).mkdir(mode=0o700, parents=True)
        meta = {
            "workspaces": [str(p) for p in spec.workspaces],
            "env": dict(spec.env),
            "ca_pem": spec.ca_cert_pem or "",
        }
        write_private(self._dir(spec.name) / "sandbox.json", json.dumps(meta))
        self._uid(spec.name)  # leased and recorded before the box first runs
        self.start(spec.name)

    def _uid(self, name: str) -> int:
        """The box's uid: its lease, or (first use) a new one, recorded in the manifest
        and sandbox.json before it is returned. Not root: this user's uid."""
        box = self._box(name)
        uid = hostbox.known_uid(box)
        if uid is None:
            try:
                uid = hostbox.box_uid(box)
            except boxuids.UidError as exc:
                raise SandboxError(f"local: {name}: {exc}") from None
            self.record(Kind.SANDBOX, name, name=name, path=str(self._dir(name)), uid=str(uid))
        meta_path = self._dir(name) / "sandbox.json"
        meta = self._meta(name)
        if meta.get("uid") != uid:
            write_private(meta_path, json.dumps({**meta, "uid": uid}))
        return uid

    def start(self, name: str) -> None:
        meta = self._meta(name)
        env, injections = self._env_and_injections(name)
        uid = self._uid(name)
        try:
            hostbox.start(
                self._box(name),
                workspace=Path(meta["workspaces"][0]),
                env=env,
                injections=injections,
                ca_pem=meta.get("ca_pem") or None,
                uid=uid,
                cache=self._cache(name),
            )
        except hostbox.BoxError as exc:
            raise SandboxError(f"local: start {name}: {exc}") from None

    def stop(self, name: str) -> None:
        self._meta(name)
        self._stop(name)

    def _stop(self, name: str) -> None:
        # Only a uid leased to this very box root is stopped as a whole: a uid the
        # records name but the lease no longer does may be another box's by now.
        try:
            hostbox.stop(self._box(name), uid=hostbox.known_uid(self._box(name)))
        except hostbox.BoxError as exc:
            raise SandboxError(f"local: stop {name}: {exc}") from None

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
        try:
            result = hostbox.run_command(
                self._box(name),
                argv,
                env={**box_env, **(env or {})},
                workspace=Path(meta["workspaces"][0]),
                uid=self._uid(name),
                stdin=stdin if stdin is not None else "",
                detach=detach,
                capture=True,
                timeout=timeout,
            )
        except hostbox.BoxError as exc:
            raise SandboxError(f"local: exec in {name}: {exc}") from None
        return ExecResult(result.returncode, result.stdout or "", result.stderr or "")

    def status(self, name: str) -> SandboxStatus:
        if not (self._dir(name) / "sandbox.json").is_file():
            return SandboxStatus.ABSENT
        box = self._box(name)
        running = hostbox.status(box, uid=hostbox.known_uid(box)) == "running"
        return SandboxStatus.RUNNING if running else SandboxStatus.STOPPED

    def logs(self, name: str) -> Logs:
        box = self._box(name)
        return Logs(
            startup=_read(box / "startup.log"), launcher=_read(box / "logs" / "launcher.log")
        )

    def remove(self, name: str) -> None:
        box = self._box(name)
        try:
            # Stopped, deleted, its cache parked for the next box of the name, uid given back.
            hostbox.remove(box, uid=hostbox.known_uid(box), cache=self._cache(name))
        except hostbox.BoxError as exc:
            raise SandboxError(f"local: remove {name}: {exc}") from None
        path = self._dir(name)
        if path.is_symlink():
            path.unlink()
        elif path.exists():
            shutil.rmtree(path)

    def list(self) -> list[str]:
        root = self.run_dir / "sandboxes"
        if not root.is_dir():
            return []
        return sorted(p.name for p in root.iterdir() if (p / "sandbox.json").is_file())

    # -- secrets: the keychain's (`Secrets`)
    def set_secret(self, sandbox: str, secret: Secret) -> None:
        self.secrets.set(sandbox, secret)

    def has_secret(self, sandbox: str, host: str) -> bool:
        return self.secrets.has(sandbox, host)

    def remove_secret(self, sandbox: str, host: str, placeholder: str) -> None:
        self.secrets.remove(sandbox, host)

    def removers(self) -> dict[Kind, Remover]:
        return {
            Kind.SANDBOX: lambda r: self.remove(r.details["name"]),
            Kind.SECRET: self.secrets.remove_recorded,
        }

    # -- after a restart (`kit.status`, `kit.resume`): a box is its agent and its proxy
    def parts(self, name: str) -> tuple[Part, ...]:
        status = self.status(name)
        out = [Part("agent", status is SandboxStatus.RUNNING, status.value)]
        box = self._box(name)
        if (box / "proxy.json").exists():  # its credential proxy's ports: one was started
            up = bool(processes.tagged_pids(boxnet.proxy_tag(box)))
            out.append(Part("credential proxy", up, "running" if up else "stopped"))
        return tuple(out)

    def resume(self, name: str) -> tuple[Part, ...]:
        """A box comes back whole: its agent is handed a fresh proxy token at each start,
        so a box with either part down is stopped, then started."""
        down = tuple(part for part in self.parts(name) if not part.up)
        if down:
            if self.status(name) is SandboxStatus.RUNNING:
                self.stop(name)
            self.start(name)
        return down


@contextlib.contextmanager
def _home_locked() -> Iterator[None]:
    """`BOXES_HOME`'s lock: a root is made and claimed, or the orphans swept, one at a time."""
    try:
        with FileLock(str(BOXES_HOME / HOME_LOCK), timeout=HOME_LOCK_TIMEOUT_S):
            yield
    except Timeout:
        raise SandboxError(
            f"local: {BOXES_HOME / HOME_LOCK} stayed locked for {HOME_LOCK_TIMEOUT_S:.0f}s; "
            "another run is making its boxes: try again"
        ) from None


def _sweep_orphans(*, keep: Path) -> list[Path]:
    """Remove each boxes root under `BOXES_HOME` (other than `keep`) that holds no box and
    whose run directory is gone. Holding no box means only dot entries (its uv caches, the
    SDK home, their locks): a box is named by a sandbox name, never a dotted one. A root
    with no record was made before roots had one, so whose it is cannot be known; it is
    removed too when it holds no box (its run directory, if it still exists, syncs its next
    box cold). Nothing is followed through a link. The caller holds `_home_locked`.
    Returns what it removed."""
    with os.scandir(BOXES_HOME) as entries:
        roots = [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    removed = []
    for root in roots:
        if root.name == keep.name:
            continue
        try:
            held = [name for name in os.listdir(root) if not name.startswith(".")]
            owner = _recorded_run_dir(root)
        except (OSError, UnicodeDecodeError, UnsafePathError):
            continue
        if held or (owner is not None and owner.exists()):
            continue
        shutil.rmtree(root, ignore_errors=True)  # fd-based: never follows a link
        if not root.exists():
            removed.append(root)
    return removed


def _recorded_run_dir(root: Path) -> Path | None:
    """The run directory a boxes root records (`OWNER`); None without a usable record."""
    try:
        data, _ = read_regular(root / OWNER, what="boxes root record")
    except FileNotFoundError:
        return None
    text = data.decode().strip()
    return Path(text) if text.startswith("/") else None  # we write it absolute


def _read(path: Path) -> str:
    """A log the agent wrote, read without following a link it may have planted there."""
    try:
        data, _ = read_regular(path, what="log")
    except FileNotFoundError:
        return ""
    except (UnsafePathError, OSError) as exc:
        return f"(not read: {exc})\n"
    return data.decode("utf-8", errors="replace")
