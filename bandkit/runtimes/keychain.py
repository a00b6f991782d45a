"""Sandbox-scoped secrets for runtimes without a host secret store (local, docker).

`Keychain` keeps one 0600 JSON file per sandbox name under `<run_dir>/keychain/`, the only
place a value is written. Entries are keyed by env name; like sbx, a secret may be stored
before its sandbox exists and outlives `remove` until it is removed itself. Each entry
keeps its scopes (`Secret.scopes`), the only places the credential proxy swaps it in; an
entry written before scopes existed has none, so its key goes nowhere (re-provision).
`Secrets` is the collaborator a runtime holds for its secret verbs: recorded, then stored.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Protocol

from bandkit.fsio import PRIVATE_DIR_MODE as DIR_MODE
from bandkit.fsio import write_private
from bandkit.manifest import Kind, Resource
from bandkit.runtimes.base import Secret, validate_name


class Keychain:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, sandbox: str) -> Path:
        return self.root / f"{sandbox}.json"

    def entries(self, sandbox: str) -> list[dict[str, Any]]:
        path = self._path(sandbox)
        if not path.is_file():
            return []
        data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def secrets(self, sandbox: str) -> list[Secret]:
        return [
            Secret(
                e["env"],
                tuple(e["hosts"]),
                e["value"],
                e["placeholder"],
                tuple(e.get("scopes") or ()),  # an entry from before scopes: goes nowhere
            )
            for e in self.entries(sandbox)
        ]

    def _write(self, sandbox: str, entries: list[dict[str, Any]]) -> None:
        if entries:
            self.root.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            write_private(self._path(sandbox), json.dumps(entries))
        else:
            self._path(sandbox).unlink(missing_ok=True)

    def put(self, sandbox: str, secret: Secret) -> None:
        entries = [e for e in self.entries(sandbox) if e["env"] != secret.env]
        entries.append(
            {
                "env": secret.env,
                "hosts": list(secret.hosts),
                "scopes": list(secret.scopes),
                "placeholder": secret.placeholder,
                "value": secret.value,
            }
        )
        self._write(sandbox, entries)

    def has(self, sandbox: str, host: str) -> bool:
        return any(host in e["hosts"] for e in self.entries(sandbox))

    def drop(self, sandbox: str, *, env: str | None = None, host: str | None = None) -> None:
        self._write(
            sandbox,
            [
                e
                for e in self.entries(sandbox)
                if not ((env is None or e["env"] == env) and (host is None or host in e["hosts"]))
            ],
        )


class Recorder(Protocol):
    """`Runtime.record`: records a resource in the run manifest before it is made."""

    def __call__(self, kind: Kind, *parts: str, **details: str) -> None: ...


class Secrets:
    """The secret verbs of a runtime whose values live in a `Keychain` (local, docker):
    each secret recorded in the manifest first (through the runtime's `record`), then
    stored; the manifest never holds a value."""

    def __init__(self, root: Path, record: Recorder) -> None:
        self.keychain = Keychain(root)
        self._record = record

    def of(self, sandbox: str) -> list[Secret]:
        return self.keychain.secrets(sandbox)

    def set(self, sandbox: str, secret: Secret) -> None:
        sandbox = validate_name(sandbox)
        self._record(
            Kind.SECRET, sandbox, secret.env, sandbox=sandbox, hosts=",".join(secret.hosts)
        )
        self.keychain.put(sandbox, secret)

    def has(self, sandbox: str, host: str) -> bool:
        return self.keychain.has(validate_name(sandbox), host)

    def remove(self, sandbox: str, host: str) -> None:
        self.keychain.drop(validate_name(sandbox), host=host)

    def remove_recorded(self, resource: Resource) -> None:
        """The manifest's remover for a `Kind.SECRET` entry `set` recorded."""
        sandbox = validate_name(resource.details["sandbox"])
        self.keychain.drop(sandbox, env=resource.key.rsplit("/", 1)[1])
