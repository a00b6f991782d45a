"""Finding a sandbox's processes by their environment tag, including mid-exec."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bandkit.runtimes import processes

# What a local sandbox box does: setpriv drops to the agent uid and execs the launcher.
DROP_AND_EXEC = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "/usr/bin/python3"]


@pytest.mark.skipif(os.geteuid() != 0, reason="setpriv to uid 1000 needs root")
def test_a_process_is_found_even_while_it_execs_again() -> None:
    # setpriv execs again at once, so a read of /proc/<pid>/environ right after spawning
    # often lands inside that exec and reads as empty (half the reads, measured here).
    # A box's status is asked right after starting it, so every spawn must be found.
    tag = "test-processes-exec"
    missed = 0
    for _ in range(100):
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
