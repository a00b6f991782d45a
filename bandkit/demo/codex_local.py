"""The pinned codex CLI for the local runtime's Dev agent (docker's is in the CLI image).

`ensure_codex(cache)` installs it once per lock: this machine's package of
`docker/band_python_kit/codex/package-lock.json` (the pin the CLI image is built from),
fetched and checked against the lock by `codex_fetch`, into `<cache>/codex-<lock digest>/`,
serialised by a file lock, marked complete only after the fetch succeeded; it returns
that package's codex binary. No node or npm is needed.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Final

from filelock import FileLock

from bandkit.demo import DemoError
from bandkit.demo.codex_fetch import CodexFetchError, fetch
from bandkit.image.facts import REPO_ROOT

Log = Callable[[str], None]
CODEX_LOCK_DIR: Final = REPO_ROOT / "docker" / "band_python_kit" / "codex"
FETCH_LOCK_TIMEOUT_S: Final = 600.0  # another run fetching the same pin
CODEX_ARGS: Final = "app-server --listen stdio://"  # CODEX_COMMAND is the whole command


def ensure_codex(cache: Path, *, log: Log, lock_dir: Path = CODEX_LOCK_DIR) -> Path:
    """The pinned codex binary, fetched once per lock into `cache`."""
    lock = lock_dir / "package-lock.json"
    try:
        digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise DemoError(f"the codex pin {lock} is unreadable: {exc.strerror}") from None
    target = cache / f"codex-{digest}"
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    with FileLock(str(cache / ".lock"), timeout=FETCH_LOCK_TIMEOUT_S):
        # An install by an earlier kit (npm's node_modules layout) is replaced too.
        if not (target / ".complete").exists() or len(_binaries(target)) != 1:
            log(f"brains: installing the pinned codex CLI into {target} (once)")
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(mode=0o755)
            try:
                fetch(lock_dir, target)
            except CodexFetchError as exc:
                raise DemoError(f"installing the codex CLI failed: {exc}") from None
            (target / ".complete").write_text("ok\n", encoding="utf-8")
    found = _binaries(target)
    if len(found) != 1:
        raise DemoError(f"expected one codex binary under {target}, found {len(found)}")
    return found[0]


def _binaries(target: Path) -> list[Path]:
    return sorted(target.glob("package/vendor/*/bin/codex"))
