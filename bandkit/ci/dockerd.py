"""Restart the Docker daemon itself, and bring it back the way it was started.

The smoke's daemon drill stops the host's dockerd (every container on it stops with it
unless live-restore is on) and starts it again. Two kinds of daemon are handled:

- **systemd** (a host booted with systemd whose `docker` unit is active): `systemctl
  stop docker.socket docker`, then `systemctl start docker`;
- **a plain process**, as `invoke ci.prepare` starts it (`bandkit.ci.prepare`: dockerd in
  the background, its own session, output appended to `DOCKERD_LOG`): SIGTERM to the pid
  in its pidfile, wait until it exited, then the same argv and environment started the
  same way.

Anything else (rootless, Docker Desktop, another DOCKER_HOST) is refused: the drill
cannot put such a daemon back. `stopped()` is the only way to stop one here: whatever
happens inside it, the daemon is started again and must answer within a deadline on the
way out (`DockerdError` otherwise, naming the log).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bandkit import processes
from bandkit.ci.prepare import DOCKERD_LOG, DOCKERD_START_TIMEOUT_S
from bandkit.ci.privilege import as_root
from bandkit.dockercli import docker_answers
from bandkit.errors import BandkitError

PIDFILE = Path("/var/run/docker.pid")
SYSTEMD_DIR = Path("/run/systemd/system")
STOP_TIMEOUT_S = 60.0  # dockerd stops its containers first (10 s each, in parallel)
POLL_S = 0.1
ANSWER_TIMEOUT_S = 5.0  # one `docker info` while waiting for the daemon


_LAUNCHED: list[subprocess.Popen[bytes]] = []  # daemons started here (kept, never waited on)


class DockerdError(BandkitError):
    """The Docker daemon could not be restarted as asked; the message says what to do."""


@dataclass(frozen=True)
class Daemon:
    how: str  # "systemd" or "process"
    pid: int
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, repr=False)

    def describe(self) -> str:
        if self.how == "systemd":
            return f"dockerd pid {self.pid} (systemd unit docker)"
        return f"dockerd pid {self.pid} ({' '.join(self.argv)}, started like `invoke ci.prepare`)"


def _read_pid(pidfile: Path) -> int:
    try:
        return int(pidfile.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        raise DockerdError(
            f"no readable dockerd pidfile at {pidfile}; the drill restarts the host's rootful "
            "Docker daemon only (start one with `uv run invoke ci.prepare --lane docker_tests`)"
        ) from None


def _is_dockerd(pid: int) -> bool:
    program = processes.exe(pid)
    return program is not None and program.name == "dockerd"


def _systemd_unit_active() -> bool:
    if not SYSTEMD_DIR.is_dir() or shutil.which("systemctl") is None:
        return False
    done = subprocess.run(["systemctl", "is-active", "--quiet", "docker"], check=False, timeout=30)
    return done.returncode == 0


def find(pidfile: Path = PIDFILE) -> Daemon:
    """The running daemon and how to put it back; DockerdError when it cannot be."""
    if os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock") not in (
        "unix:///var/run/docker.sock",
        "unix:///run/docker.sock",
    ):
        raise DockerdError("DOCKER_HOST names another daemon; the drill restarts the host's own")
    if as_root(["true"]) is None:
        raise DockerdError("restarting dockerd needs root or passwordless sudo")
    pid = _read_pid(pidfile)
    if not _is_dockerd(pid):
        raise DockerdError(f"pid {pid} in {pidfile} is not a running dockerd; is the daemon up?")
    if _systemd_unit_active():
        return Daemon("systemd", pid)
    argv, environ = processes.cmdline(pid), processes.environ(pid)
    if argv is None or environ is None:
        raise DockerdError(f"cannot read how dockerd pid {pid} was started")
    env = dict(e.decode().partition("=")[::2] for e in environ if b"=" in e)
    return Daemon("process", pid, tuple(a.decode() for a in argv if a), env)


def _gone(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # our own child (a daemon we started): reap it
    return not processes.alive(pid)


def _run_root(argv: list[str], what: str) -> None:
    command = as_root(argv)
    if command is None:
        raise DockerdError(f"{what} needs root or passwordless sudo")
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        raise DockerdError(f"{what} failed (exit {done.returncode}): {done.stderr.strip()[:300]}")


def stop(daemon: Daemon, timeout_s: float = STOP_TIMEOUT_S) -> float:
    """Stop the daemon; seconds until it had exited."""
    started = time.monotonic()
    if daemon.how == "systemd":
        _run_root(["systemctl", "stop", "docker.socket", "docker"], "systemctl stop docker")
    elif os.geteuid() == 0:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon.pid, signal.SIGTERM)
    else:
        _run_root(["kill", "-TERM", str(daemon.pid)], "kill -TERM dockerd")
    while not _gone(daemon.pid):
        if time.monotonic() - started > timeout_s:
            raise DockerdError(f"dockerd pid {daemon.pid} did not exit {timeout_s:.0f}s after TERM")
        time.sleep(POLL_S)
    return time.monotonic() - started


def start(daemon: Daemon, timeout_s: float = DOCKERD_START_TIMEOUT_S) -> float:
    """Start the daemon the way it was started; seconds until `docker info` answers."""
    started = time.monotonic()
    if daemon.how == "systemd":
        _run_root(["systemctl", "start", "docker"], "systemctl start docker")
    else:
        command = as_root(list(daemon.argv))
        if command is None:
            raise DockerdError("starting dockerd needs root or passwordless sudo")
        with DOCKERD_LOG.open("ab") as log:
            launched = subprocess.Popen(  # the daemon outlives this process (as ci.prepare)
                command,
                stdout=log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env=daemon.env,
                start_new_session=True,
            )
        _LAUNCHED.append(launched)
    while not docker_answers(ANSWER_TIMEOUT_S):
        if time.monotonic() - started > timeout_s:
            where = "journalctl -u docker" if daemon.how == "systemd" else str(DOCKERD_LOG)
            raise DockerdError(f"dockerd did not answer within {timeout_s:.0f}s; see {where}")
        time.sleep(POLL_S)
    return time.monotonic() - started


@dataclass
class Restart:
    daemon: Daemon
    stop_s: float = 0.0  # TERM -> exited
    start_s: float | None = None  # relaunch -> answering (None: it did not come back)


@contextlib.contextmanager
def stopped(daemon: Daemon, *, timeout_s: float = DOCKERD_START_TIMEOUT_S) -> Iterator[Restart]:
    """The daemon stopped for the body; started again and answering on the way out,
    whatever happened (DockerdError when it does not answer by the deadline)."""
    restart = Restart(daemon)
    try:
        restart.stop_s = stop(daemon)
        yield restart
    finally:
        if not docker_answers(ANSWER_TIMEOUT_S):
            restart.start_s = start(daemon, timeout_s)
