"""One timed `demo.up` round, as a user runs it, and the scratch run directory it runs in
(shared by the `demo` and `demo --brains stub` benchmarks)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from bandkit.demo.layout import DemoLayout

REPO: Final = Path(__file__).resolve().parents[2]
ROUND_TIMEOUT_S: Final = 600.0
QUIET_LINES: Final = ("demo.up: phase ", "demo.up: timings", "demo.up: transcript")


@contextmanager
def scratch_run(prefix: str) -> Iterator[Path]:
    """A fresh run directory (0755: docker's agent uid reads its workspaces), removed with
    the run's box root afterwards."""
    run_dir = Path(tempfile.mkdtemp(prefix=prefix))
    run_dir.chmod(0o755)
    try:
        yield run_dir
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(DemoLayout.for_run_dir(run_dir).box_root, ignore_errors=True)


def timed_round(
    run_dir: Path, runtime: str = "local", brains: str = "scripted"
) -> tuple[float, float]:
    """(command -> verdict, verdict -> exit) seconds for one happy run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAND_", "DEMO_"))}
    env.update(PYTHONUNBUFFERED="1", DEMO_GRACE_S="0")
    argv = [
        sys.executable,
        "-m",
        "invoke",
        "demo.up",
        "--platform",
        "local",
        "--runtime",
        runtime,
        "--headless",
        "--scenario",
        "happy",
        "--brains",
        brains,
        "--run-dir",
        str(run_dir),
    ]
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    verdict_at = None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if verdict_at is None and "VERDICT:" in line:
            verdict_at = time.monotonic()
    code = process.wait(ROUND_TIMEOUT_S)
    ended = time.monotonic()
    if code != 0 or verdict_at is None:
        raise RuntimeError(f"demo.up exited {code} without a verdict:\n{''.join(lines[-20:])}")
    return verdict_at - started, ended - verdict_at


def why_failed(exc: RuntimeError) -> str:
    """The line of a failed round's output that says why (not a phase or summary line)."""
    said = [line for line in str(exc).splitlines() if line.startswith("demo.up: ")]
    why = [line for line in said if not line.startswith(QUIET_LINES)] or said or [str(exc)]
    return why[-1]
