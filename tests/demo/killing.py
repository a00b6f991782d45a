"""`kill -9` of `uv run invoke demo.up` when a phase's progress line appears, as a user
would do it (the whole process group, from another terminal), then `demo.down`.

Used by the local kill tests (tests/demo/test_demo_kill.py) and the docker ones
(tests/docker/test_demo_docker.py). Every command runs from the repo root, as documented.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from bandkit.emulator import service
from tests import commands
from tests.runtimes.helpers import REPO

CANARY = "canary-user-key-kill-5d0c3a91"  # planted as the local platform's user key
AGENT_KEY_PREFIX = "band_a_"  # every emulator agent key starts so
RUN_TIMEOUT_S = 420.0


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
            if line.startswith(marker):
                found = True
                kill()
                break
        seen.append(process.stdout.read())
        code = process.wait(timeout=60)
    finally:
        watchdog.cancel()
    output = "".join(seen)
    assert found, f"demo.up never printed {marker!r} (exit {code}):\n{output[-3000:]}"
    assert code == -signal.SIGKILL, output[-3000:]
    return Killed(marker, output, code)


def down(run_dir: Path) -> subprocess.CompletedProcess[str]:
    argv = ["uv", "run", "invoke", "demo.down", "--run-dir", str(run_dir)]
    return commands.run(argv, env=demo_env(), timeout=300)
