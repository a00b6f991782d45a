"""What the demo's end-to-end tests share: one demo run as a user runs it, on the local
platform with a canary user key, and the checks that nothing is left.

- `start_platform` (the `platform` fixture in conftest.py): one run directory with the
  emulator started like `platform.up`, the canary planted as its key file; `up` runs
  `demo.up --runtime local --headless` in it, `assert_nothing_left` checks the platform,
  processes, files and outputs afterwards, `timings` reads the run's timings line.
- `up_until` runs `uv run invoke demo.up` and `kill -9`s its whole process group when a
  progress line appears, as a user would from another terminal; `up_then` runs it and
  does something else at that line (`kill_platform`: an OOM kill of its platform), and
  lets it finish; `down` is `demo.down`.
  Used by the local kill tests and the docker ones. Every command runs from the repo root.
- `Live` runs a command in the background (its own process group, stdin not a tty) and
  collects its output as it comes, for a test that acts while `demo.up` runs (the
  presenter in the room page) or follows it (`demo.logs --follow`).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bandkit import daemons, processes
from bandkit.demo import teardown
from bandkit.demo.layout import DemoLayout
from bandkit.emulator import service
from examples.docker_demo.cast import DEMO_NAMES
from tests import commands
from tests.runtimes.helpers import REPO, scratch_dir
from tests.support.wait import wait_for

CANARY = "canary-user-key-demo-77b1c0e4"  # planted as the local platform's user key
AGENT_KEY_PREFIX = "band_a_"  # every emulator agent key starts so
RUN_TIMEOUT_S = 420.0
SKIPPED_DIRS = {".uv-cache", ".sdk", "cli", "keychain"}  # caches (keyless), the key store
TIMINGS = re.compile(r"demo\.up: timings: (?P<body>.*); exit code (?P<code>\d+)")


def plant_canary(run_dir: Path) -> None:
    key_file = run_dir / service.KEY_FILE
    key_file.write_text(CANARY + "\n")
    key_file.chmod(0o600)


def demo_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAND_", "DEMO_"))}
    return {**env, "PYTHONUNBUFFERED": "1", "DEMO_GRACE_S": "0.5", **extra}


@dataclass
class Killed:
    marker: str
    output: str  # everything demo.up printed (stdout and stderr), up to its death
    returncode: int


def phase_marker(phase: str) -> str:
    return f"demo.up: phase {phase}:"


def up_until(
    run_dir: Path, marker: str, *, runtime: str = "local", scenario: str = "happy", **env: str
) -> Killed:
    """Run demo.up; SIGKILL its process group when a line starting with `marker` appears."""
    done = _up(run_dir, marker, None, runtime=runtime, scenario=scenario, env=env)
    assert done.returncode == -signal.SIGKILL, done.output[-3000:]
    return done


def up_then(
    run_dir: Path,
    marker: str,
    act: Callable[[], None],
    *,
    runtime: str = "local",
    scenario: str = "happy",
) -> Killed:
    """Run demo.up; call `act` (from the test: kill its platform, say) when a line starting
    with `marker` appears, then let the run go on to its own end."""
    return _up(run_dir, marker, act, runtime=runtime, scenario=scenario, env={})


def _up(
    run_dir: Path,
    marker: str,
    act: Callable[[], None] | None,
    *,
    runtime: str,
    scenario: str,
    env: dict[str, str],
) -> Killed:
    """demo.up in its own process group, read line by line; at the first line starting
    with `marker`, `act` (or, without one, SIGKILL the group and stop reading)."""
    argv = ["uv", "run", "invoke", "demo.up", "--runtime", runtime, "--headless"]
    argv += ["--scenario", scenario, "--run-dir", str(run_dir)]
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=demo_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its own group: the kill takes uv, invoke and their children
    )

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    watchdog = threading.Timer(RUN_TIMEOUT_S, kill)  # a run that hangs still ends
    watchdog.start()
    seen: list[str] = []
    found = False
    try:
        assert process.stdout is not None
        for line in process.stdout:
            seen.append(line)
            if not found and line.startswith(marker):
                found = True
                if act is None:
                    kill()
                    break
                act()
        seen.append(process.stdout.read())
        code = process.wait(timeout=60)
    finally:
        watchdog.cancel()
    output = "".join(seen)
    assert found, f"demo.up never printed {marker!r} (exit {code}):\n{output[-3000:]}"
    return Killed(marker, output, code)


def kill_platform(run_dir: Path) -> int:
    """`kill -9` the local platform of `run_dir` (as an OOM kill would); its pid."""
    pid = int(json.loads((run_dir / service.RUN_FILE).read_text())["pid"])
    assert daemons.runs_module(pid, service.MODULE), f"no local platform runs in {run_dir}"
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not daemons.runs_module(pid, service.MODULE), 10, "the platform to die")
    return pid


def down(run_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = ["uv", "run", "invoke", "demo.down", *flags, "--run-dir", str(run_dir)]
    return commands.run(argv, env=demo_env(), timeout=300)


@dataclass
class Platform:
    run_dir: Path
    rest_url: str
    layout: DemoLayout

    def get(self, path: str) -> list[dict[str, object]]:
        response = httpx.get(self.rest_url + path, headers={"x-api-key": CANARY}, timeout=10)
        response.raise_for_status()
        return list(response.json()["data"])


def start_platform() -> Iterator[Platform]:
    """A run directory with the local platform started in it (the canary as its user key);
    afterwards whatever a failed test left is torn down and the directories removed."""
    run_dir = scratch_dir("demo-e2e-")
    plant_canary(run_dir)
    record, _ = service.up(run_dir)
    layout = DemoLayout.for_run_dir(run_dir)
    try:
        yield Platform(run_dir, record.rest_url, layout)
    finally:
        teardown.down(run_dir, env={}, log=print)  # whatever a failed test left
        for pid in tagged_processes(layout.box_root):
            os.kill(pid, signal.SIGKILL)
        service.down(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
        if layout.box_root != run_dir / "demo-boxes":
            shutil.rmtree(layout.box_root, ignore_errors=True)


def invoke(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return commands.invoke(*args, env=env)


def up(
    platform: Platform, scenario: str, *flags: str, **env: str
) -> subprocess.CompletedProcess[str]:
    args = ["demo.up", "--runtime", "local", "--headless", "--scenario", scenario]
    return invoke(*args, *flags, "--run-dir", str(platform.run_dir), env=demo_env(**env))


def box_uids(layout: DemoLayout) -> dict[str, int]:
    """Each demo sandbox's box uid, as the local runtime recorded it (its sandbox.json)."""
    sandboxes = layout.runtimes / "local" / "sandboxes"
    return {
        meta.parent.name: int(json.loads(meta.read_text(encoding="utf-8"))["uid"])
        for meta in sorted(sandboxes.glob("*/sandbox.json"))
    }


def local_box(layout: DemoLayout, sandbox: str) -> Path:
    """Where the local runtime keeps that sandbox's box."""
    from bandkit.runtimes.local import LocalRuntime

    return LocalRuntime(layout.runtimes / "local").boxes_root() / sandbox


def uid_of(pid: int) -> int:
    uid = processes.owner(pid)
    assert uid is not None, f"pid {pid} is gone"
    return uid


def tagged_processes(box_root: Path) -> list[int]:
    """Live processes whose kit tag names a path under `box_root` (boxes and their proxies)."""
    tag, root = f"{processes.TAG_ENV}=".encode(), str(box_root).encode()
    return processes.scan(lambda p: any(e.startswith(tag) and root in e for e in p.environ))


def texts(*roots: Path) -> str:
    out = []
    for root in roots:
        for path in root.rglob("*"):
            skip = SKIPPED_DIRS & set(path.relative_to(root).parts)
            if path.is_file() and not skip and path.name != service.KEY_FILE:
                out.append(path.read_text(errors="replace"))
    return "\n".join(out)


def assert_nothing_left(platform: Platform, done: subprocess.CompletedProcess[str]) -> None:
    layout = platform.layout
    assert not [a["name"] for a in platform.get("/api/v1/me/agents") if a["name"] in DEMO_NAMES]
    assert not [
        r for r in platform.get("/api/v1/me/chats") if "Design Review" in str(r.get("title"))
    ]
    assert tagged_processes(layout.box_root) == []
    assert list(layout.workspaces.glob("*")) == []
    local = layout.runtimes / "local"
    assert list((local / "sandboxes").glob("*")) == []
    assert list((local / "keychain").glob("*")) == []
    assert [p.name for p in (local / "boxes").iterdir()] == sorted(
        p.name for p in (local / "boxes").iterdir() if p.name.startswith(".")
    )  # only the shared caches stay
    assert not layout.manifest.exists()
    assert not Path(str(layout.manifest) + ".lock").exists()
    assert not layout.run_file.exists()
    everything = "\n".join([done.stdout, done.stderr, texts(platform.run_dir, layout.box_root)])
    assert CANARY not in everything
    assert AGENT_KEY_PREFIX not in everything


def timings(done: subprocess.CompletedProcess[str]) -> dict[str, float]:
    match = TIMINGS.search(done.stdout)
    assert match, done.stdout
    return {k: float(v.split()[0]) for k, v in (p.split(" ", 1) for p in match["body"].split(", "))}


class Live:
    """A command running in the background; its output lines collected as they come."""

    def __init__(self, argv: list[str], *, env: dict[str, str], timeout_s: float) -> None:
        self.process = subprocess.Popen(
            argv,
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._watchdog = threading.Timer(timeout_s, self.kill)  # a run that hangs still ends
        self._watchdog.daemon = True
        self._watchdog.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def line(self, predicate: Callable[[str], bool]) -> str | None:
        return next((line for line in self.lines if predicate(line)), None)

    def line_or_end(self, predicate: Callable[[str], bool]) -> str | None:
        """`line`, but a command that has ended with no such line fails (its output shown)."""
        found = self.line(predicate)
        if found is None and self.process.poll() is not None:
            raise AssertionError(f"ended ({self.process.returncode}) without it:\n{self.output}")
        return found

    def wait(self, timeout: float) -> int:
        try:
            code = self.process.wait(timeout)
        finally:
            self._watchdog.cancel()
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """SIGKILL whatever is left of its process group (the group outlives its leader
        while a member lives, so its id is not reused meanwhile)."""
        self._watchdog.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)


def live_invoke(*args: str, env: dict[str, str], timeout_s: float = RUN_TIMEOUT_S) -> Live:
    """`uv run invoke <args>` in the background (see `Live`)."""
    return Live(["uv", "run", "invoke", *args], env=env, timeout_s=timeout_s)
