"""`daemons.spawn`: a background service is on record before it does anything, so a task
killed while it starts one leaves no service behind (`kill -9` of `demo.up` as it started
its platform once left an emulator that no record named, and `demo.down` could not stop).

The killed-task test drives the real `bandkit.emulator.service.up` in a child process and
SIGKILLs that process while it writes the run record; the emulator it spawned must exit
by itself, before it binds a port or reads its state."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bandkit import daemons, processes
from bandkit.emulator import service
from tests.support.wait import wait_for

CHILD = textwrap.dedent(
    """
    import sys
    from bandkit import daemons
    if not daemons.await_go("the test service"):
        raise SystemExit(daemons.EXIT_NO_GO)
    open(sys.argv[1], "w").close()  # what a service does once let go
    print("Ctrl-C to stop.", flush=True)
    """
)

# A task that starts the emulator and is killed while it records it: the record write
# blocks (the test kills the task there) and says so on stdout first.
STARTER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from bandkit.emulator import service
    real = service.write_private
    def blocked(path, text):
        real(path, text)
        print("recorded", flush=True)
        time.sleep(60)
    service.write_private = blocked
    service.up(Path(sys.argv[1]))
    """
)


def _gone(pid: int) -> bool:
    return processes.cmdline(pid) is None


def test_a_service_runs_only_after_its_pid_is_on_record(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    seen: list[tuple[int, bool]] = []
    with (tmp_path / "log").open("ab") as log:
        proc = daemons.spawn(
            [sys.executable, "-c", CHILD, str(marker)],
            log=log,
            record=lambda pid: seen.append((pid, marker.exists())),
        )
    banner = daemons.read_banner(proc, 20, what="the test service", error=daemons.BindError)
    assert proc.wait(10) == 0
    assert seen == [(proc.pid, False)]  # recorded before it did anything
    assert banner == ["Ctrl-C to stop."]
    assert marker.exists()


def test_a_record_that_fails_lets_nothing_run(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    pids: list[int] = []

    def fail(pid: int) -> None:
        pids.append(pid)
        raise OSError("disk full")

    with (tmp_path / "log").open("ab") as log, pytest.raises(OSError, match="disk full"):
        daemons.spawn([sys.executable, "-c", CHILD, str(marker)], log=log, record=fail)
    assert _gone(pids[0])  # spawn waited for it to end
    assert not marker.exists()
    assert "went away first; not starting" in (tmp_path / "log").read_text()


def test_the_starter_killed_while_it_records_leaves_no_emulator(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(run_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pid = 0
    try:
        assert starter.stdout is not None
        assert starter.stdout.readline().strip() == "recorded", starter.stderr.read()
        pid = int(json.loads((run_dir / service.RUN_FILE).read_text())["pid"])
        assert daemons.runs_module(pid, service.MODULE)  # it waits for its go
        os.kill(starter.pid, signal.SIGKILL)
        starter.wait(10)
        wait_for(lambda: _gone(pid), timeout=15, what="the emulator to exit without its go")
    finally:
        if starter.poll() is None:
            os.killpg(starter.pid, signal.SIGKILL)
        if pid and daemons.runs_module(pid, service.MODULE):  # the failure this test is for
            daemons.stop(pid, timeout=5)
    log = (run_dir / service.LOG_FILE).read_text()
    assert "the task that started it went away first; not starting" in log
    assert not (run_dir / service.STATE_FILE).exists()  # it never loaded or saved its state
