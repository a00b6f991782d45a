"""Run a command as a user does, from the repo root: output captured, no stdin, a deadline.

`invoke(...)` is `python -m invoke ...` with this interpreter (the project's venv), the same
as `uv run invoke ...` without uv's own start-up.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def invoke(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "invoke", *args], env=env, timeout=timeout)
