"""The launch stamp: what the last successful launch validated and synced.

One JSON file, `<runtime.statePath>/launcher-stamp.json` (0600, written atomically),
records:
- `config_sha256` and `schema`: band.yaml bytes that passed the strict schema, and
  a digest of the validation code itself, so a changed file or a changed launcher
  means validating again;
- `sync`: the fingerprint of the last `uv sync --locked` (uv.lock, pyproject.toml,
  the base interpreter, the venv and project paths, uv's dependency selection settings)
  and the venv's installed distributions.
The stamp only ever skips work: a missing, unreadable or foreign stamp means "do
everything". It is read only from a state path that already passed the runtime
path rule (outside the workspace and the SDK home), so the workspace cannot forge it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launcher.constants import STAMP_FILENAME, SYNC_SELECTION_ENV

STAMP_VERSION = 1
# Source files whose contents decide whether a document is valid.
_VALIDATION_SOURCES = ("schema.py", "urls.py", "constants.py")


def schema_fingerprint() -> str:
    digest = hashlib.sha256(f"stamp-v{STAMP_VERSION}".encode())
    here = Path(__file__).parent
    for name in _VALIDATION_SOURCES:
        try:
            digest.update((here / name).read_bytes())
        except OSError:
            digest.update(b"missing:" + name.encode())
    return digest.hexdigest()


def read_stamp(state_path: Path) -> dict[str, Any]:
    """The stamp's content, or {} when absent, unreadable or not ours."""
    try:
        data = json.loads((state_path / STAMP_FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("version") != STAMP_VERSION:
        return {}
    return data


def trusted_config_digest(stamp: dict[str, Any]) -> str | None:
    """The band.yaml digest the stamp vouches for, if it was made by this validation code."""
    digest = stamp.get("config_sha256")
    if isinstance(digest, str) and stamp.get("schema") == schema_fingerprint():
        return digest
    return None


def write_stamp(state_path: Path, stamp: dict[str, Any]) -> None:
    """Atomically replace the stamp (owner-only)."""
    state_path.mkdir(parents=True, exist_ok=True)
    target = state_path / STAMP_FILENAME
    temporary = target.with_name(f".{STAMP_FILENAME}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({**stamp, "version": STAMP_VERSION}, handle, indent=2, sort_keys=True)
    os.replace(temporary, target)


def remove_stamp_sync(state_path: Path) -> None:
    """Forget the sync record before touching the venv (a crash mid-sync then re-syncs)."""
    stamp = read_stamp(state_path)
    if stamp.pop("sync", None) is not None:
        write_stamp(state_path, stamp)


def base_interpreter() -> Path:
    """The interpreter customer venvs are built on: the SDK venv's base python."""
    return Path(sys.base_prefix) / "bin" / "python3"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def interpreter_identity(interpreter: Path) -> dict[str, Any]:
    real = interpreter.resolve()
    info = real.stat()
    return {
        "path": str(interpreter),
        "real": str(real),
        "size": info.st_size,
        "mtime_ns": info.st_mtime_ns,
        "version": sys.version,
    }


def sync_selection(environ: Mapping[str, str]) -> dict[str, str]:
    """The uv settings in `environ` that change what the sync installs (`SYNC_SELECTION_ENV`)."""
    return {name: environ[name] for name in SYNC_SELECTION_ENV if name in environ}


def sync_fingerprint(
    project: Path, environment: Path, interpreter: Path, selection: Mapping[str, str]
) -> dict[str, Any]:
    """What a `uv sync --locked` result depends on (files must exist: checked before)."""
    return {
        "lock_sha256": _sha256(project / "uv.lock"),
        "pyproject_sha256": _sha256(project / "pyproject.toml"),
        "interpreter": interpreter_identity(interpreter),
        "environment": str(environment),
        "project": str(project),
        "selection": dict(selection),
    }


def installed_distributions(environment: Path) -> list[str]:
    """Sorted *.dist-info names in the venv's site-packages ([] if there are none)."""
    names: list[str] = []
    for site in sorted(environment.glob("lib/python*/site-packages")):
        names += [entry for entry in os.listdir(site) if entry.endswith(".dist-info")]
    return sorted(names)


def venv_problem(environment: Path, interpreter: Path) -> str:
    """Why the venv is not intact, or ""."""
    python = environment / "bin" / "python"
    if not (environment / "pyvenv.cfg").is_file():
        return "the venv has no pyvenv.cfg"
    if not python.exists():
        return "the venv has no bin/python"
    if python.resolve() != interpreter.resolve():
        return "the venv's python is not the base interpreter"
    return ""


def sync_skip_reason(
    stamp: dict[str, Any], fingerprint: dict[str, Any], environment: Path, interpreter: Path
) -> tuple[bool, str]:
    """(can skip, why) comparing the stamp with the current fingerprint and venv."""
    recorded = stamp.get("sync")
    if not isinstance(recorded, dict):
        return False, "no record of a previous sync"
    for key, label in (
        ("lock_sha256", "uv.lock changed"),
        ("pyproject_sha256", "pyproject.toml changed"),
        ("interpreter", "the base interpreter changed"),
        ("environment", "runtime.environmentPath changed"),
        ("project", "the project path changed"),
        ("selection", "uv's dependency selection (UV_NO_DEFAULT_GROUPS and the like) changed"),
    ):
        if recorded.get(key) != fingerprint[key]:
            return False, label
    if problem := venv_problem(environment, interpreter):
        return False, problem
    if recorded.get("distributions") != installed_distributions(environment):
        return False, "the venv's installed distributions changed"
    return True, "lock, pyproject and interpreter unchanged since the last sync; venv intact"
