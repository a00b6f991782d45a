"""The pinned codex CLI for the local runtime's Dev agent (docker's is in the CLI image).

`ensure_codex(cache)` installs it once per lock: `npm ci --ignore-scripts` of
`docker/band_python_kit/codex/package-lock.json` (the pin the CLI image is built from)
into `<cache>/codex-<lock digest>/`, serialised by a file lock, marked complete only
after npm succeeded; it returns the one platform binary npm installed.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Final

from filelock import FileLock

from bandkit.demo import DemoError
from bandkit.image.facts import REPO_ROOT

Log = Callable[[str], None]
CODEX_LOCK_DIR: Final = REPO_ROOT / "docker" / "band_python_kit" / "codex"
NPM_TIMEOUT_S: Final = 600.0
CODEX_ARGS: Final = "app-server --listen stdio://"  # CODEX_COMMAND is the whole command


def ensure_codex(cache: Path, *, log: Log, lock_dir: Path = CODEX_LOCK_DIR) -> Path:
    """The pinned codex binary, `npm ci`-installed once per lock into `cache`."""
    lock = lock_dir / "package-lock.json"
    try:
        digest = hashlib.sha256(lock.read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise DemoError(f"the codex pin {lock} is unreadable: {exc.strerror}") from None
    target = cache / f"codex-{digest}"
    cache.mkdir(mode=0o755, parents=True, exist_ok=True)
    with FileLock(str(cache / ".lock"), timeout=NPM_TIMEOUT_S):
        if not (target / ".complete").exists():
            log(f"brains: installing the pinned codex CLI into {target} (once)")
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir(mode=0o755)
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(lock_dir / name, target / name)
            argv = ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
            try:
                done = subprocess.run(
                    argv,
                    cwd=target,
                    capture_output=True,
                    text=True,
                    timeout=NPM_TIMEOUT_S,
                    check=False,
                    stdin=subprocess.DEVNULL,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise DemoError(f"npm ci for the codex CLI failed: {exc}") from None
            if done.returncode != 0:
                tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
                raise DemoError(
                    f"npm ci for the codex CLI failed (exit {done.returncode}):\n{tail}"
                )
            (target / ".complete").write_text("ok\n", encoding="utf-8")
    found = sorted(target.glob("node_modules/@openai/codex-*/vendor/*/bin/codex"))
    if len(found) != 1:
        raise DemoError(f"expected one codex binary under {target}, found {len(found)}")
    return found[0]
