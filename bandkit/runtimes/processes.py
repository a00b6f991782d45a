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


# While a process is inside execve (setpriv -> python -> the agent all exec in one pid),
# /proc/<pid>/environ reads as empty for a moment: about 1 read in 10 right after spawn
# here. Such a read is taken again until the exec has finished, within this bound.
EXEC_SETTLE_S = 1.0
PF_KTHREAD = 0x00200000  # kernel threads have no environment at all


def tagged_pids(tag: str, *, prefix: bool = False, proc: Path = PROC) -> list[int]:
    """Pids of live (non-zombie) processes whose environment carries exactly this tag (or,
    with `prefix`, a tag starting with it: every supervisor of a run, say)."""
    wanted = tag_entry(tag)
    found: list[int] = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
            if _is_zombie(stat) or _is_kernel_thread(stat):
                continue
            environ = _settled_environ(entry)
        except OSError:
            continue  # gone meanwhile, or not ours to read
        entries = environ.split(b"\0")
        if wanted in entries or (prefix and any(e.startswith(wanted) for e in entries)):
            found.append(int(entry.name))
    return sorted(found)


def _settled_environ(entry: Path) -> bytes:
    """The process's environment, read again while it is mid-exec (reads as empty)."""
    environ = (entry / "environ").read_bytes()
    deadline = time.monotonic() + EXEC_SETTLE_S
    while not environ and time.monotonic() < deadline:
        time.sleep(0.005)
        environ = (entry / "environ").read_bytes()
    return environ


def _stat_fields(stat: str) -> list[str]:
    # /proc/<pid>/stat: "pid (comm) S ppid ... flags ..."; comm may contain spaces or parens.
    return stat.rpartition(")")[2].split()


def _is_zombie(stat: str) -> bool:
    return _stat_fields(stat)[:1] == ["Z"]


def _is_kernel_thread(stat: str) -> bool:
    fields = _stat_fields(stat)
    return len(fields) > 6 and int(fields[6]) & PF_KTHREAD != 0


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
