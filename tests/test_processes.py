"""Finding a sandbox's processes by their environment tag, including mid-exec, the
general scan under it, and one process read by its pid."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bandkit import processes
from tests.support.wait import wait_for

# What a local sandbox box does: setpriv drops to the agent uid and execs the launcher.
DROP_AND_EXEC = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "/usr/bin/python3"]


@pytest.mark.skipif(os.geteuid() != 0, reason="setpriv to uid 1000 needs root")
def test_a_process_is_found_even_while_it_execs_again() -> None:
    # setpriv execs again at once, so a read of /proc/<pid>/environ right after spawning
    # often lands inside that exec and reads as empty (half the reads, measured here).
    # A box's status is asked right after starting it, so every spawn must be found.
    tag = "test-processes-exec"
    missed = 0
    for _ in range(50):  # a miss shows within a few spawns (1 read in 10 lands mid-exec)
        child = subprocess.Popen(
            [*DROP_AND_EXEC, "-c", "import time; time.sleep(5)"],
            env={processes.TAG_ENV: tag, "PATH": "/usr/bin:/bin"},
        )
        try:
            if child.pid not in processes.tagged_pids(tag):
                missed += 1
        finally:
            child.kill()
            child.wait()
    assert missed == 0
    assert processes.tagged_pids(tag) == []


def test_untagged_and_exited_processes_are_not_found() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"], env={"PATH": "/usr/bin:/bin"})
    child.wait()
    assert processes.tagged_pids("test-processes-none") == []


def test_a_prefix_finds_every_tag_that_starts_with_it_and_exact_stays_exact() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        env={processes.TAG_ENV: "test-processes-prefix/box-1/x", "PATH": "/usr/bin:/bin"},
    )
    try:
        assert processes.tagged_pids("test-processes-prefix/", prefix=True) == [child.pid]
        assert processes.tagged_pids("test-processes-prefix/") == []  # exact by default
        assert processes.tagged_pids("test-processes-prefiy", prefix=True) == []
    finally:
        child.kill()
        child.wait()


def test_scan_finds_a_process_by_its_environment_and_command_line() -> None:
    marker = b"test-processes-scan-live"
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)", marker.decode()],
        env={"SCAN_MARKER": marker.decode(), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert processes.scan(lambda p: b"SCAN_MARKER=" + marker in p.environ) == [child.pid]
        assert processes.scan(lambda p: marker in p.cmdline and p.pid == child.pid) == [child.pid]
        assert processes.scan(lambda p: b"SCAN_MARKER=" + marker + b"x" in p.environ) == []
    finally:
        child.kill()
        child.wait()


def test_scan_skips_a_zombie() -> None:
    marker = b"SCAN_MARKER=test-processes-scan-zombie"
    child = subprocess.Popen(
        [sys.executable, "-c", "pass"], env={"SCAN_MARKER": marker.split(b"=")[1].decode()}
    )
    try:
        wait_for(lambda: not processes.alive(child.pid), 10, "the child to exit (unreaped)")
        assert (Path("/proc") / str(child.pid)).exists()  # a zombie: exited, not yet reaped
        assert processes.scan(lambda p: p.pid == child.pid or marker in p.environ) == []
    finally:
        child.wait()


def test_processes_with_an_empty_environment_do_not_slow_a_scan() -> None:
    """A sandbox may run `env -i sleep` (as many as it likes): an empty environment with a
    command line is settled, not a mid-exec read, so a scan waits on none of them, young
    or old."""
    children = [subprocess.Popen(["/usr/bin/env", "-i", "/bin/sleep", "60"]) for _ in range(5)]
    try:
        for child in children:
            cmdline = Path(f"/proc/{child.pid}/cmdline")
            wait_for(lambda c=cmdline: c.read_bytes().startswith(b"/bin/sleep"), 5, "the exec")
        began = time.monotonic()
        assert processes.tagged_pids("test-processes-empty-env") == []
        assert time.monotonic() - began < processes.EXEC_SETTLE_S / 2
    finally:
        for child in children:
            child.kill()
            child.wait()


def test_an_environment_that_appears_a_moment_after_the_command_line_is_found(
    tmp_path: Path,
) -> None:
    """A read that meets a process between two execs (or between the kernel setting its
    command line and its environment) sees a command line and no environment yet. The
    scan looks again for a moment before it takes the empty environment as the process's
    own. A stand-in /proc: the environment is written 10 ms into the scan."""
    entry = tmp_path / "4242"
    entry.mkdir()
    (entry / "stat").write_text("4242 (python3) S 1 4242 4242 0 -1 4194560 0 0 0 0\n")
    (entry / "cmdline").write_bytes(b"/usr/bin/python3\0-c\0pass\0")
    (entry / "environ").write_bytes(b"")
    late = threading.Timer(0.01, (entry / "environ").write_bytes, [b"BANDKIT_TAG=late\0"])
    late.start()
    try:
        assert processes.tagged_pids("late", proc=tmp_path) == [4242]
    finally:
        late.cancel()


def test_one_process_by_pid_and_none_once_it_is_gone() -> None:
    me = os.getpid()
    assert processes.alive(me)
    assert (processes.stat(me) or [""])[0] in ("R", "S")
    assert processes.cmdline(me)
    assert f"{processes.TAG_ENV}=x".encode() not in (processes.environ(me) or ())
    assert processes.status(me, "Pid") == str(me)
    assert processes.owner(me) == os.geteuid()
    assert processes.exe(me) is not None
    with subprocess.Popen(["true"]) as child:
        child.wait()
    gone = child.pid
    assert not processes.alive(gone)
    assert (processes.stat(gone), processes.cmdline(gone), processes.environ(gone)) == (
        None,
        None,
        None,
    )
    assert (processes.status(gone, "Pid"), processes.owner(gone), processes.exe(gone)) == (
        None,
        None,
        None,
    )
