"""Helpers to run the sbx simulator (`tests/fakes/sbx`) from tests.

A simulator's environment has the stand-in docker CLI (`tests/fakes/dockerbin`) first on
PATH: what the sbx runtime would `docker save` into sbx is what a test registers with
`docker_archive.FakeDocker` (none by default), never this host's images (a built
`band-python-kit:local` would otherwise be saved, 390 MB, into every simulated sbx).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bandkit import processes
from bandkit.runtimes import hostbox

FAKES = Path(__file__).resolve().parent
SBX = FAKES / "sbx"
IDLE_ENV = "SBX_SIM_IDLE_S"  # 0.43+: seconds before an unattached sandbox stops
WATCHER_ENV = "SBX_SIM_WATCHER"
REQUIRE_TEMPLATES = "SBX_SIM_REQUIRE_TEMPLATES"  # 1: create refuses an image not loaded


@dataclass
class Sim:
    """One simulator instance: its state dir, a world-readable scratch dir, and its env."""

    state: Path
    scratch: Path
    env: dict[str, str]

    def __call__(
        self, *args: str, input: str | None = None, check: bool = False, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["sbx", *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            env=self.env,
            check=False,
            timeout=timeout,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"sbx {args} failed: {result.stderr}")
        return result

    def workspace(self, name: str = "ws") -> Path:
        path = self.scratch / name
        path.mkdir(mode=0o755, exist_ok=True)
        return path

    def outputs(self) -> str:
        """Everything the simulator wrote except the keychain (the host credential store)
        and the boxes' uv caches (`vms/.uv-cache`: package archives uv fetched, tens of MB
        that no output of ours goes into)."""
        caches = self.state / "vms" / ".uv-cache"
        parts = []
        for path in sorted(self.state.rglob("*")):
            if path.is_relative_to(caches) or not path.is_file() or path.name == "keychain.json":
                continue
            parts.append(path.read_text(errors="replace"))
        return "\n".join(parts)


def sim_env(
    state: Path,
    version: str | None = None,
    idle_s: float | None = None,
    *,
    require_templates: bool = False,
) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(REQUIRE_TEMPLATES, None)
    if require_templates:
        env[REQUIRE_TEMPLATES] = "1"
    env["PATH"] = os.pathsep.join(
        [str(FAKES), str(FAKES / "dockerbin"), str(Path(sys.executable).parent), env["PATH"]]
    )
    env.pop("FAKE_DOCKER_DIR", None)  # no images unless the test registers some
    env["SBX_SIM_STATE"] = str(state)
    if version:
        env["SBX_SIM_VERSION"] = version
    else:
        env.pop("SBX_SIM_VERSION", None)
    if idle_s is not None:
        env[IDLE_ENV] = f"{idle_s:g}"
    else:
        env.pop(IDLE_ENV, None)
    return env


@functools.cache
def shared_sdk_home() -> Path:
    """As root, the image-like SDK home (the python the boxes run as their uid) of every
    simulator this process starts, built once: as sandboxes share their kit image. Each
    simulator would otherwise build its own beside its boxes, about a second per test."""
    root = Path(tempfile.mkdtemp(prefix="sbxsim-sdk-", dir="/tmp"))
    os.chmod(root, 0o755)  # noqa: S103 - the box uids run its python
    atexit.register(shutil.rmtree, root, True)
    hostbox.ensure_sdk_home(root / "sdk")  # what a box builds beside itself, done once
    return root / "sdk"


def watchers(state: Path) -> list[int]:
    """Pids of the simulator's idle watchers for `state` (its stand-in daemon)."""
    wanted = f"{WATCHER_ENV}={state}".encode()
    return processes.scan(lambda p: wanted in p.environ)


@contextmanager
def simulator(
    version: str | None = None, *, idle_s: float | None = None, require_templates: bool = False
) -> Iterator[Sim]:
    """A fresh simulator with world-readable dirs under /tmp (the agent uid must read them);
    `idle_s`: the 0.43+ idle auto-stop (default: the simulator's 75 s); `require_templates`:
    create refuses an image that is neither loaded nor pinned by digest."""
    scratch = Path(tempfile.mkdtemp(prefix="sbxsim-", dir="/tmp"))
    os.chmod(scratch, 0o755)  # noqa: S103 - box uids run sandbox commands in here
    state = scratch / "state"
    env = sim_env(state, version, idle_s, require_templates=require_templates)
    if os.geteuid() == 0 and not env.get(hostbox.SDK_ENV):
        env[hostbox.SDK_ENV] = str(shared_sdk_home())
    sim = Sim(state=state, scratch=scratch, env=env)
    try:
        yield sim
    finally:
        if sim.state.exists():
            for name in sim("ls", "-q").stdout.split():
                sim("rm", "-f", name)
            for vm in (sim.state / "vms").glob("*"):  # whatever a failed test left running
                if vm.is_dir() and not vm.name.startswith("."):  # not the shared SDK home
                    uid = hostbox.known_uid(vm)
                    hostbox.stop(vm, uid=uid, grace_s=5)
                    hostbox.release_uid(vm, uid)
            for pid in watchers(sim.state):  # they exit once their sandbox is gone
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(scratch, ignore_errors=True)
