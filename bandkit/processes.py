"""Host processes read from `/proc`: the one place that does. Owned processes of a run are
found by a tag in their environment or by their uid; one process is read by its pid.

A process is recorded in the manifest by its tag *before* it is spawned; the tag travels
in the child's environment (`BANDKIT_TAG=<tag>`) and survives `execve`, so teardown finds
every process of a sandbox through `/proc/<pid>/environ` even when the parent was killed
before it could write down a pid. A tag is the process's own to drop (`env -i`), so a
box that runs as a uid of its own is stopped by that uid (`terminate_uid`: every process
of it, whatever its environment). Linux only (the kit's hosts and CI are Linux).

One process by pid (each None once it is gone or not ours to read): `stat` (the fields
after the command name: the state first, the start time at index 19), `alive` (not a
zombie), `cmdline` and `environ` (the NUL-separated entries), `status` (one line of
`/proc/<pid>/status`), `owner` (the uid that owns its `/proc` entry) and `exe`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

TAG_ENV = "BANDKIT_TAG"
PROC = Path("/proc")


def tag_entry(tag: str) -> bytes:
    return f"{TAG_ENV}={tag}".encode()


# While a process is inside execve (setpriv -> python -> the agent all exec in one pid),
# /proc/<pid>/environ (and cmdline) read as empty for a moment: about 1 read in 10 right
# after spawn here. Such a read is taken again until the exec has finished, within this
# bound (one deadline for the whole scan).
EXEC_SETTLE_S = 1.0
# The kernel sets a new program's command line a moment before its environment, so a read
# in between sees a command line and no environment, as `env -i` does for good (1 spawn
# in about 100 here, more under load). Such a process is read again until this much of
# the scan has passed; only then is its empty environment taken as its own.
EMPTY_ENV_SETTLE_S = 0.05
PF_KTHREAD = 0x00200000  # kernel threads have no environment at all


@dataclass(frozen=True)
class Proc:
    """One live process as `scan` read it: its environment entries (`NAME=value`, in order)
    and its raw command line (NUL-separated arguments)."""

    pid: int
    environ: tuple[bytes, ...]
    cmdline: bytes


def scan(match: Callable[[Proc], bool], *, proc: Path = PROC) -> list[int]:
    """Pids, ascending, of the live processes `match` accepts. Zombies and kernel threads
    are skipped, a mid-exec process (environment and command line both read empty) is
    read again until it settles, and a process that is gone meanwhile or not ours to read
    is left out. The re-reads share one `EXEC_SETTLE_S` deadline per scan. A process whose
    environment reads empty beside a command line is read again for `EMPTY_ENV_SETTLE_S`
    only (it may be one exec further on, or `env -i` for good), so no number of such
    processes makes a scan slow."""
    found: list[int] = []
    pending: list[Path] = []
    began = time.monotonic()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
            if _is_zombie(stat) or _is_kernel_thread(stat):
                continue
            read = _read_settled(entry)
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if read is None or not read.environ:
            pending.append(entry)
        if read is not None and match(read):
            found.append(read.pid)
    while pending:
        now = time.monotonic() - began
        if now >= EXEC_SETTLE_S:
            break
        time.sleep(0.005)
        still: list[Path] = []
        for entry in pending:
            try:
                read = _read_settled(entry)
            except OSError:
                continue
            if read is not None and match(read) and read.pid not in found:
                found.append(read.pid)
            if read is None or (not read.environ and now < EMPTY_ENV_SETTLE_S):
                still.append(entry)
        pending = still
    return sorted(found)


def _read_settled(entry: Path) -> Proc | None:
    """The process as read now, or None while it is inside execve (its environment and
    its command line both read empty for a moment then)."""
    environ = (entry / "environ").read_bytes()
    cmdline = b""
    if not environ:
        cmdline = (entry / "cmdline").read_bytes()
        environ = (entry / "environ").read_bytes()  # after the command line: settled?
        if not environ and not cmdline:
            return None
    if not cmdline:
        cmdline = (entry / "cmdline").read_bytes()
    return Proc(int(entry.name), tuple(e for e in environ.split(b"\0") if e), cmdline)


def tagged_pids(tag: str, *, prefix: bool = False, proc: Path = PROC) -> list[int]:
    """Pids of live (non-zombie) processes whose environment carries exactly this tag (or,
    with `prefix`, a tag starting with it: every supervisor of a run, say)."""
    wanted = tag_entry(tag)

    def carries(p: Proc) -> bool:
        return wanted in p.environ or (prefix and any(e.startswith(wanted) for e in p.environ))

    return scan(carries, proc=proc)


def _stat_fields(stat: str) -> list[str]:
    # /proc/<pid>/stat: "pid (comm) S ppid ... flags ..."; comm may contain spaces or parens.
    return stat.rpartition(")")[2].split()


def _is_zombie(stat: str) -> bool:
    return _stat_fields(stat)[:1] == ["Z"]


def _is_kernel_thread(stat: str) -> bool:
    fields = _stat_fields(stat)
    return len(fields) > 6 and int(fields[6]) & PF_KTHREAD != 0


def alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie waiting to be reaped."""
    fields = stat(pid)
    return fields is not None and fields[:1] != ["Z"]


def stat(pid: int) -> list[str] | None:
    """The fields of `/proc/<pid>/stat` after the command name (the state first), or None."""
    try:
        raw = (PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return _stat_fields(raw)


def _entries(pid: int, name: str) -> tuple[bytes, ...] | None:
    try:
        raw = (PROC / str(pid) / name).read_bytes()
    except OSError:
        return None
    return tuple(entry for entry in raw.split(b"\0") if entry)


def cmdline(pid: int) -> tuple[bytes, ...] | None:
    """The arguments of `pid` (empty for a zombie), or None."""
    return _entries(pid, "cmdline")


def environ(pid: int) -> tuple[bytes, ...] | None:
    """The environment entries (`NAME=value`) of `pid`, or None when it is not ours to read."""
    return _entries(pid, "environ")


def status(pid: int, key: str) -> str | None:
    """The value of the `key:` line of `/proc/<pid>/status` (`VmHWM` -> `"1234 kB"`), or None."""
    try:
        text = (PROC / str(pid) / "status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return value.strip()
    return None


def owner(pid: int) -> int | None:
    """The uid that owns `/proc/<pid>` (the process's effective uid when it started)."""
    try:
        return (PROC / str(pid)).stat().st_uid
    except OSError:
        return None


def exe(pid: int) -> Path | None:
    """The program `pid` runs, or None."""
    try:
        return Path(os.readlink(PROC / str(pid) / "exe"))
    except OSError:
        return None


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
    return _wait_none(lambda: tagged_pids(tag), timeout_s)


def _wait_none(find: Callable[[], list[int]], timeout_s: float) -> bool:
    """True once `find` lists no process, False if some are left after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while find():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# -- by uid: every process whose real, effective, saved or filesystem uid is the box's


def _uids(entry: Path) -> tuple[int, ...]:
    """The four uids of `/proc/<pid>/status` (real, effective, saved, filesystem)."""
    for line in (entry / "status").read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("Uid:"):
            return tuple(int(field) for field in line.split()[1:5])
    return ()


def _uid_scan(proc: Path) -> dict[int, tuple[int, ...]]:
    """pid -> uids of every live (non-zombie) process."""
    found: dict[int, tuple[int, ...]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="utf-8", errors="replace")
            if _is_zombie(stat):
                continue
            found[int(entry.name)] = _uids(entry)
        except OSError:
            continue  # gone meanwhile
    return found


def uid_pids(uid: int, *, proc: Path = PROC) -> list[int]:
    """Pids, ascending, of the live processes that run as `uid` (any of their four uids)."""
    return sorted(pid for pid, uids in _uid_scan(proc).items() if uid in uids)


def uids_of(pid: int, *, proc: Path = PROC) -> tuple[int, ...]:
    """The four uids of a live process (real, effective, saved, filesystem); () if gone."""
    try:
        return _uids(proc / str(pid))
    except OSError:
        return ()


def live_uids(*, proc: Path = PROC) -> set[int]:
    """Every uid some live process runs as."""
    return {uid for uids in _uid_scan(proc).values() for uid in uids}


def _refuse_shared(uid: int) -> None:
    if uid in (0, os.getuid(), os.geteuid()):
        raise RuntimeError(f"refusing to stop every process of uid {uid}: it is not a box's own")


def terminate_uid(uid: int, *, grace_s: float = 10.0) -> list[int]:
    """SIGTERM every process of `uid`, SIGKILL all of them after `grace_s`; return the
    pids. Only for a uid that is a box's alone (never root's, never this process's).

    The SIGKILL is sent as that uid (`kill -KILL -1`): the kernel then signals every
    process of the uid in one pass, so a process that forks meanwhile cannot outrun it.
    Raises `RuntimeError` if any survive.
    """
    _refuse_shared(uid)
    pids = uid_pids(uid)
    if not pids:
        return []
    _signal_all(pids, signal.SIGTERM)
    if not _wait_uid_gone(uid, grace_s):
        for _ in range(3):
            _kill_all_as(uid)
            _signal_all(uid_pids(uid), signal.SIGKILL)
            if _wait_uid_gone(uid, 2.0):
                break
        else:
            raise RuntimeError(f"processes of uid {uid} survived SIGKILL: {uid_pids(uid)}")
    return pids


def _kill_all_as(uid: int) -> None:
    """`kill(-1, SIGKILL)` from a process of `uid` with no groups: every process of that
    uid but the sender itself. Needs root; a no-op without a `kill` binary."""
    kill = shutil.which("kill", path="/usr/bin:/bin")
    if kill is None or os.geteuid() != 0:
        return
    subprocess.run(
        [kill, "-s", "KILL", "--", "-1"],
        user=uid,
        group=uid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin"},
        cwd="/",
        stdin=subprocess.DEVNULL,
        capture_output=True,
        check=False,
        timeout=10,
    )


def _wait_uid_gone(uid: int, timeout_s: float) -> bool:
    return _wait_none(lambda: uid_pids(uid), timeout_s)
