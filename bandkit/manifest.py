"""Run manifests: every resource a task makes is recorded *before* it is made.

The flow for a mutating task:

1. `Manifest.open(path)` takes an exclusive lock on the manifest (released by the kernel
   if the process dies, so a re-run after `kill -9` can open it again).
2. `manifest.record(kind, key, **details)` appends the resource and rewrites the file
   atomically (temp file, fsync, rename; mode 0600, directory 0700) **before** the caller
   creates it. A crash between record and create leaves an entry for something that may
   not exist; removers therefore treat "already absent" as success.
3. `teardown(manifest, removers)` walks the entries in reverse order, calls the remover
   registered for each kind, drops an entry from the file only once its removal
   succeeded, reports every failure, and deletes the manifest only when nothing is left.
   It is idempotent: run it again until it reports clean. A remover that finds nothing
   left to remove for a reason worth saying (the platform an agent lived on is gone with
   its state; the operator chose to forget an unreachable one) raises `Cleared`: the
   entry is dropped and the reason reported (`cleared ...`), never a silent success.

Entries hold names, ids and paths only; never a secret value (`record` refuses a detail
that looks like one of the values passed as `secrets=`, and tests grep manifests for a
planted canary).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Literal

from filelock import FileLock, Timeout
from pydantic import BaseModel, ConfigDict, ValidationError

from bandkit.errors import BandkitError
from bandkit.fsio import PRIVATE_DIR_MODE, PRIVATE_MODE, remove_stale_temps, write_private

MANIFEST_MODE = PRIVATE_MODE
DIR_MODE = PRIVATE_DIR_MODE
LOCK_TIMEOUT_S = 10.0


class ManifestError(BandkitError):
    """A manifest could not be read, written or locked; the message says what to do."""


class Kind(StrEnum):
    """What a manifest entry names. Removers are registered per kind."""

    SANDBOX = "sandbox"
    SECRET = "secret"  # noqa: S105 (a kind name, not a value)
    POLICY = "policy"
    AGENT = "agent"
    AGENT_ID = "agent-id"  # agent.id written into a workspace's band.yaml (key: its path)
    ROOM = "room"
    PROCESS = "process"
    WORKSPACE = "workspace"
    TEMPLATE = "template"  # an image loaded into a sandbox runtime's image store (sbx)
    CLUSTER = "cluster"  # a piece of the local cluster (bandkit/cluster: its `part` says which)
    MEMBER = "fleet-member"  # an agent of a fleet (bandkit/fleet: key = its name)


class Resource(BaseModel):
    """One recorded resource: its kind, a key unique within the kind, and plain details."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Kind
    key: str
    details: dict[str, str] = {}
    recorded_at: str = ""

    @property
    def ref(self) -> str:
        return f"{self.kind.value}:{self.key}"


class ManifestFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal["1"] = "1"
    run_id: str
    resources: list[Resource] = []


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Manifest:
    """An open, locked manifest. Use `Manifest.open(path)` as a context manager."""

    def __init__(self, path: Path, data: ManifestFile, secrets: Iterable[str] = ()) -> None:
        self.path = path
        self._data = data
        self._secrets = tuple(s for s in secrets if s)

    @classmethod
    @contextmanager
    def open(
        cls, path: Path, *, run_id: str = "", secrets: Iterable[str] = ()
    ) -> Iterator[Manifest]:
        """Lock and load `path` (an absent file is an empty manifest, not yet written)."""
        path = Path(path)
        path.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        lock = FileLock(str(path) + ".lock")
        try:
            lock.acquire(timeout=LOCK_TIMEOUT_S)
        except Timeout:
            raise ManifestError(
                f"manifest {path} is locked by another running task; wait for it to finish"
            ) from None
        try:
            remove_stale_temps(path)  # a writer killed mid-write (we hold the lock now)
            yield cls(path, cls._load(path, run_id), secrets)
        finally:
            lock.release()
            if not path.exists():  # nothing recorded any more: leave no trace either
                Path(lock.lock_file).unlink(missing_ok=True)
                with suppress(OSError):
                    path.parent.rmdir()  # only when empty

    @staticmethod
    def read(path: Path) -> tuple[Resource, ...]:
        """What `path` records now, without taking its lock (every write is an atomic
        rename, so a reader sees one whole version): for status, never for changes."""
        return tuple(Manifest._load(Path(path), "").resources)

    @staticmethod
    def _load(path: Path, run_id: str) -> ManifestFile:
        if not path.exists():
            return ManifestFile(run_id=run_id or path.parent.name)
        try:
            return ManifestFile.model_validate_json(path.read_text(encoding="utf-8"))
        except (OSError, ValidationError, ValueError) as exc:
            raise ManifestError(
                f"manifest {path} is unreadable or malformed ({type(exc).__name__}); "
                "inspect it, remove the listed resources by hand, then delete the file"
            ) from None

    @property
    def run_id(self) -> str:
        return self._data.run_id

    @property
    def resources(self) -> tuple[Resource, ...]:
        return tuple(self._data.resources)

    def find(self, kind: Kind, key: str) -> Resource | None:
        return next((r for r in self._data.resources if r.kind is kind and r.key == key), None)

    def record(self, kind: Kind, key: str, **details: str) -> Resource:
        """Record a resource before creating it; recording the same one twice is a no-op."""
        for value in (key, *details.values()):
            if any(secret in value for secret in self._secrets):
                raise ManifestError(f"refusing to record a secret value in {kind.value} entry")
        existing = self.find(kind, key)
        if existing is not None:
            if details and {**existing.details, **details} != existing.details:
                return self.update(existing, **details)
            return existing
        resource = Resource(kind=kind, key=key, details=details, recorded_at=_now())
        self._data.resources.append(resource)
        self._save()
        return resource

    def update(self, resource: Resource, **details: str) -> Resource:
        """Add details learned after creation (a pid, an id); the entry keeps its place."""
        for value in details.values():
            if any(secret in value for secret in self._secrets):
                raise ManifestError(f"refusing to record a secret value in {resource.ref}")
        index = self._index(resource)
        merged = resource.model_copy(update={"details": {**resource.details, **details}})
        self._data.resources[index] = merged
        self._save()
        return merged

    def forget(self, resource: Resource) -> None:
        """Drop an entry whose resource is gone; delete the file when none are left."""
        self._data.resources.pop(self._index(resource))
        self._save()

    def _index(self, resource: Resource) -> int:
        for index, candidate in enumerate(self._data.resources):
            if candidate.kind is resource.kind and candidate.key == resource.key:
                return index
        raise ManifestError(f"{resource.ref} is not in manifest {self.path}")

    def _save(self) -> None:
        if not self._data.resources:
            self.path.unlink(missing_ok=True)
            return
        write_private(self.path, self._data.model_dump_json(indent=2) + "\n")


Remover = Callable[[Resource], None]


class Cleared(Exception):
    """Raised by a remover: there is nothing to remove (or nothing we may still reach),
    and the entry is to be dropped; the message says why, for the report."""


@dataclass
class TeardownReport:
    """What teardown removed, what it cleared without removing (with the reason) and what
    it could not remove (with a message per failure)."""

    removed: list[Resource] = field(default_factory=list)
    failed: list[tuple[Resource, str]] = field(default_factory=list)
    cleared: list[tuple[Resource, str]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.failed

    def lines(self) -> list[str]:
        out = [f"removed {r.ref}" for r in self.removed]
        out += [f"cleared {r.ref}: {msg}" for r, msg in self.cleared]
        out += [f"FAILED {r.ref}: {msg}" for r, msg in self.failed]
        return out


def teardown(
    manifest: Manifest,
    removers: Mapping[Kind, Remover],
    *,
    redact: Iterable[str] = (),
    only: Iterable[Kind] = (),
) -> TeardownReport:
    """Remove every recorded resource in reverse order (of the kinds in `only`, when
    given); keep the failures recorded.

    A remover must be idempotent: it returns normally when the resource is gone (including
    when it was never created) and raises with a message when it could not remove it.
    """
    report = TeardownReport()
    secrets = tuple(s for s in redact if s)
    kinds = frozenset(only)
    for resource in reversed(manifest.resources):
        if kinds and resource.kind not in kinds:
            continue
        remover = removers.get(resource.kind)
        if remover is None:
            report.failed.append((resource, f"no remover for kind {resource.kind.value!r}"))
            continue
        try:
            remover(resource)
        except Cleared as exc:
            manifest.forget(resource)
            report.cleared.append((resource, _redacted(str(exc), secrets)))
            continue
        except Exception as exc:
            message = _redacted(str(exc) or type(exc).__name__, secrets)
            report.failed.append((resource, message))
            continue
        manifest.forget(resource)
        report.removed.append(resource)
    return report


def _redacted(message: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        message = message.replace(secret, "***")
    return message
