"""Keep an sbx sandbox attached: `sbx run --name N` held on a pty, restarted with backoff.

From sbx 0.43 a sandbox with no attached session stops after about a minute, and a
current-shape kit's entrypoint (the agent) runs only while a session is attached. The sbx
runtime therefore starts one detached supervisor process per sandbox
(`python -m bandkit.runtimes.sbx.supervisor --name N --dir D --tag T`), which outlives the
task that started it. It:

- holds `sbx run --name N` on a pseudo-terminal (`os.openpty`; the pty is the child's
  controlling terminal, so the child gets SIGHUP if the supervisor dies) and appends
  everything it prints to `D/N/attach.log` (0600, never through a link);
- restarts it when it exits while the sandbox is still listed, after `Backoff.delay(n)`
  (deterministic: base * factor**n, capped; `n` resets after a healthy run) and gives up
  after `max_failures` quick failures in a row;
- on SIGTERM stops its child (SIGTERM, then SIGKILL) and exits, removing its pid file.

Its pid file (`D/N/supervisor.json`: pid, kernel start time, tag) is written by the
supervisor itself. `stop` signals a pid only after proving it is this supervisor: the pid's
start time matches the file and its environment carries the tag (`BANDKIT_TAG`), which its
children inherit too, so `processes.terminate_tagged(tag)` also finds them.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from bandkit import processes
from bandkit.fsio import PRIVATE_DIR_MODE, UnsafePathError, read_regular, write_private

# A supervisor lives for days: it keeps no credential of the task that started it.
SECRETISH = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH", re.IGNORECASE)
PID_FILE = "supervisor.json"
LOG_FILE = "attach.log"
START_TIMEOUT_S = 10.0
STOP_GRACE_S = 10.0
LS_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Backoff:
    """Restart delays: base * factor**n seconds, at most `cap`; no jitter (testable)."""

    base: float = 0.5
    factor: float = 2.0
    cap: float = 15.0
    healthy_s: float = 30.0  # a run at least this long resets n
    max_failures: int = 8  # quick failures in a row before giving up

    def delay(self, failures: int) -> float:
        return float(min(self.cap, self.base * self.factor**failures))


def paths(directory: Path, name: str) -> tuple[Path, Path]:
    """(pid file, attach log) of sandbox `name`'s supervisor under `directory`."""
    return directory / name / PID_FILE, directory / name / LOG_FILE


def attach_log(directory: Path, name: str) -> str | None:
    """What sandbox `name`'s `sbx run` printed (the agent's output), None if nothing yet;
    UnsafePathError for a log that is not a regular file of ours."""
    _, log = paths(directory, name)
    try:
        return read_regular(log, what="attach log")[0].decode(errors="replace")
    except FileNotFoundError:
        return None


def private_dir(path: Path) -> Path:
    """`path` as a 0700 directory of ours (a link or someone else's directory: refused)."""
    path.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    info = path.lstat()
    if path.is_symlink() or not path.is_dir() or info.st_uid != os.getuid():
        raise UnsafePathError(f"{path} is not a directory of this user; remove it")
    os.chmod(path, PRIVATE_DIR_MODE)
    return path


def open_log(path: Path) -> int:
    private_dir(path.parent)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    return os.open(path, flags, 0o600)


def scrubbed_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the platform's settings and anything named like a credential."""
    return {k: v for k, v in env.items() if not k.startswith("BAND_") and not SECRETISH.search(k)}


def start_time(pid: int) -> str | None:
    """The kernel start time of `pid` (field 22 of /proc/<pid>/stat); None if gone."""
    fields = processes.stat(pid) or []
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def carries_tag(pid: int, tag: str) -> bool:
    return processes.tag_entry(tag) in (processes.environ(pid) or ())


def verified_pid(directory: Path, name: str, tag: str) -> int | None:
    """The live supervisor's pid when the pid file proves it is ours, else None."""
    pid_file, _ = paths(directory, name)
    try:
        data = json.loads(read_regular(pid_file, what="supervisor pid file")[0])
        pid, started = int(data["pid"]), str(data["start_time"])
    except (FileNotFoundError, UnsafePathError, ValueError, KeyError, TypeError):
        return None  # absent, planted (a link) or malformed: nothing proven, nothing signalled
    if data.get("tag") != tag or pid <= 1:
        return None
    if start_time(pid) != started or not carries_tag(pid, tag):
        return None  # gone, or the pid now names another process: not ours to signal
    return pid


def spawn(
    name: str,
    *,
    directory: Path,
    tag: str,
    binary: str,
    env: Mapping[str, str] | None = None,
) -> int:
    """Start the detached supervisor unless a verified one runs; return its pid."""
    running = verified_pid(directory, name, tag)
    if running is not None:
        return running
    pid_file, log = paths(directory, name)
    private_dir(pid_file.parent)
    pid_file.unlink(missing_ok=True)  # stale (its pid is not a supervisor of ours)
    argv = [sys.executable, "-m", "bandkit.runtimes.sbx.supervisor", "--name", name]
    argv += ["--dir", str(directory), "--tag", tag, "--binary", binary]
    child_env = {**scrubbed_env({**os.environ, **(env or {})}), processes.TAG_ENV: tag}
    log_fd = open_log(log)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            env=child_env,
            start_new_session=True,  # outlives the task (and its Ctrl-C) that started it
            close_fds=True,
        )
    finally:
        os.close(log_fd)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if verified_pid(directory, name, tag) == proc.pid:
            return proc.pid
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    raise RuntimeError(f"the supervisor of sandbox {name} did not start; see {log}")


def stop(name: str, *, directory: Path, tag: str, grace_s: float = STOP_GRACE_S) -> bool:
    """Stop sandbox `name`'s supervisor (and its `sbx run`); True if one was running."""
    pid_file, _ = paths(directory, name)
    pid = verified_pid(directory, name, tag)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while verified_pid(directory, name, tag) == pid and time.monotonic() < deadline:
            time.sleep(0.02)
        if verified_pid(directory, name, tag) == pid:  # proven ours again just now
            os.kill(pid, signal.SIGKILL)
    processes.terminate_tagged(tag, grace_s=grace_s)  # one that outlived its pid file
    pid_file.unlink(missing_ok=True)
    return pid is not None


class Supervisor:
    """The restart loop. `attach`, `listed`, `sleep` and `clock` are injectable (tests)."""

    def __init__(
        self,
        name: str,
        *,
        binary: str = "sbx",
        log_fd: int = 1,
        backoff: Backoff | None = None,
        attach: Callable[[Sequence[str]], int] | None = None,
        listed: Callable[[], bool] | None = None,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.name = name
        self.binary = binary
        self.log_fd = log_fd
        self.backoff = backoff or Backoff()
        self.attach = attach or self.attach_on_pty
        self.listed = listed or self.sandbox_listed
        self.sleep = sleep or self.nap
        self.clock = clock
        self.stopping = False
        self.stop_at = 0.0
        self.child: subprocess.Popen[bytes] | None = None
        self.runs = 0

    def say(self, text: str) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with contextlib.suppress(OSError):
            os.write(self.log_fd, f"[supervisor {stamp}] {text}\n".encode())

    def nap(self, seconds: float) -> None:
        """Sleep, cut short by a stop request."""
        deadline = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < deadline:
            time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))

    def request_stop(self, *_: object) -> None:
        self.stopping = True
        self.stop_at = time.monotonic()
        child = self.child
        if child is not None and child.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                child.terminate()

    def run(self) -> int:
        """Attach until asked to stop or the sandbox is gone; 1 after too many failures."""
        failures = 0
        argv = [self.binary, "run", "--name", self.name]
        while not self.stopping:
            started = self.clock()
            self.runs += 1
            self.say(f"attaching: {' '.join(argv)} (run {self.runs})")
            code = self.attach(argv)
            if self.stopping:
                break
            if not self.listed():
                self.say(f"sandbox {self.name} is not listed any more; supervisor exits")
                return 0
            failures = 0 if self.clock() - started >= self.backoff.healthy_s else failures + 1
            if failures > self.backoff.max_failures:
                self.say(f"gave up after {failures - 1} restarts in a row (last exit {code})")
                return 1
            delay = self.backoff.delay(max(failures - 1, 0))
            self.say(f"sbx run exited {code}; restarting in {delay:g}s")
            self.sleep(delay)
        self.say("stopped")
        return 0

    def attach_on_pty(self, argv: Sequence[str]) -> int:
        """Run argv with a new pty as its terminal; copy its output to the log."""
        master, slave = os.openpty()
        # The child does not carry our tag: what it starts (an sbx daemon) is not ours.
        env = {k: v for k, v in os.environ.items() if k != processes.TAG_ENV}
        try:
            self.child = subprocess.Popen(
                list(argv),
                stdin=slave,
                stdout=slave,
                stderr=slave,
                start_new_session=True,
                preexec_fn=_controlling_tty,  # the supervisor is single-threaded
                close_fds=True,
                env=env,
            )
        except OSError as exc:
            os.close(master)
            self.say(f"cannot start {argv[0]}: {exc}")
            return 127
        finally:
            os.close(slave)
        try:
            self._pump(master, self.child)
        finally:
            os.close(master)
        code = self.child.wait()
        self.child = None
        return code

    def _pump(self, master: int, child: subprocess.Popen[bytes]) -> None:
        while True:
            try:
                ready, _, _ = select.select([master], [], [], 0.5)
            except InterruptedError:
                continue
            if self.stopping and time.monotonic() - self.stop_at > STOP_GRACE_S / 2:
                with contextlib.suppress(ProcessLookupError):
                    child.kill()  # did not end its session on SIGTERM
            if not ready:
                if child.poll() is not None:
                    return
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every holder of the pty's other end has closed it
                return
            if not chunk:
                return
            with contextlib.suppress(OSError):
                os.write(self.log_fd, chunk)

    def sandbox_listed(self) -> bool:
        try:
            proc = subprocess.run(
                [self.binary, "ls", "--json"],
                capture_output=True,
                text=True,
                check=False,
                timeout=LS_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired):
            return True  # cannot tell: keep supervising
        lines = proc.stdout.splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.lstrip().startswith("{")), None)
        if proc.returncode != 0 or start is None:
            return True
        try:
            rows = json.loads("\n".join(lines[start:])).get("sandboxes") or []
        except ValueError:
            return True
        return any(row.get("name") == self.name for row in rows)


def _controlling_tty() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def write_pid_file(directory: Path, name: str, tag: str) -> None:
    pid_file, _ = paths(directory, name)
    pid = os.getpid()
    data = {"pid": pid, "start_time": start_time(pid), "tag": tag, "name": name}
    write_private(pid_file, json.dumps(data) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bandkit.runtimes.sbx.supervisor")
    parser.add_argument("--name", required=True)
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--tag", required=True)
    parser.add_argument("--binary", default="sbx")
    args = parser.parse_args(argv)
    if os.environ.get(processes.TAG_ENV) != args.tag:
        parser.error(f"{processes.TAG_ENV} must equal --tag (the proof this process is ours)")
    pid_file, log = paths(args.dir, args.name)
    log_fd = open_log(log)
    supervisor = Supervisor(args.name, binary=args.binary, log_fd=log_fd)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        supervisor.request_stop()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    write_pid_file(args.dir, args.name, args.tag)
    try:
        return supervisor.run()
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, KeyError):
            if json.loads(pid_file.read_text(encoding="utf-8"))["pid"] == os.getpid():
                pid_file.unlink()
        os.close(log_fd)


if __name__ == "__main__":
    raise SystemExit(main())
