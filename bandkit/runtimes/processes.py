"""Host processes owned by a run, found by a tag in their environment.

A process is recorded in the manifest by its tag *before* it is spawned; the tag travels
in the child's environment (`BANDKIT_TAG=<tag>`) and survives `execve`, so teardown finds
every process of a sandbox through `/proc/<pid>/environ` even when the parent was killed
before it could write down a pid. Linux only (the kit's hosts and CI are Linux).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

TAG_ENV = "BANDKIT_TAG"
PROC = Path("/proc")


def tag_entry(tag: str) -> bytes:
    return f"{TAG_ENV}={tag}".encode()


def tagged_pids(tag: str, *, proc: Path = PROC) -> list[int]:
    """Pids of live (non-zombie) processes whose environment carries exactly this tag."""
    wanted = tag_entry(tag)
    found: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if wanted in environ.split(b"\0") and not _is_zombie(stat):
            found.append(int(entry.name))
    return sorted(found)


def _is_zombie(stat: str) -> bool:
    # /proc/<pid>/stat: "pid (comm) S ..."; comm may contain spaces or parens.
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


def alive(pid: int) -> bool:
    try:
        stat = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return not _is_zombie(stat)


def _signal_all(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def terminate_tagged(tag: str, *, grace_s: float = 10.0) -> list[int]:
    """SIGTERM every tagged process, SIGKILL what is left after `grace_s`; return the pids.

    Raises `RuntimeError` if any survive SIGKILL (for example a process of another user).
    """
    pids = tagged_pids(tag)
    if not pids:
        return []
    _signal_all(pids, signal.SIGTERM)
    if not wait_gone(tag, grace_s):
        _signal_all(tagged_pids(tag), signal.SIGKILL)
        if not wait_gone(tag, 5.0):
            raise RuntimeError(f"processes tagged {tag} survived SIGKILL: {tagged_pids(tag)}")
    return pids


def wait_gone(tag: str, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while tagged_pids(tag):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
