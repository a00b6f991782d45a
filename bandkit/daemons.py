"""Background services a task starts and stops (the local platform, the LLM stub).

Two facts each service needs: whether a recorded pid still runs our module (a pid is
reused by the kernel, so the command line is checked, never the pid alone), and a bounded
stop (SIGTERM, wait on a pidfd, then SIGKILL).
"""

from __future__ import annotations

import os
import select
import signal
from pathlib import Path

KILL_WAIT_S = 5.0


def runs_module(pid: int, module: str) -> bool:
    """True only if `pid` is alive and runs `python -m <module>`."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return module.encode() in cmdline


def stop(pid: int, *, timeout: float) -> str:
    """SIGTERM `pid`, wait up to `timeout`, then SIGKILL; says which it took."""
    pidfd = os.pidfd_open(pid)
    try:
        os.kill(pid, signal.SIGTERM)
        ready, _, _ = select.select([pidfd], [], [], timeout)
        if ready:
            return f"stopped pid {pid}"
        os.kill(pid, signal.SIGKILL)
        select.select([pidfd], [], [], KILL_WAIT_S)
        return f"killed pid {pid} after {timeout:.0f}s without a clean stop"
    finally:
        os.close(pidfd)
