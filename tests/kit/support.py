"""A user's checkout as the restart tests drive it (tests/kit/test_restarts_e2e.py on the
local runtime, tests/docker/test_restarts_docker.py on docker): a run directory, agent
workspaces copied from the echo-agent starter, the invoke tasks run as a user runs them
(no `BAND_*` from this process), and the local platform's record and agents."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx

from bandkit import daemons
from bandkit.emulator import service
from bandkit.image.facts import STARTER_DIR
from tests import commands
from tests.support.wait import wait_for


@dataclass
class Home:
    """A user's checkout-like directory: a run directory and agent workspaces."""

    root: Path
    run_dir: Path

    def invoke(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("BAND_")}
        return commands.invoke(*args, "--run-dir", str(self.run_dir), env=env, timeout=300)

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.invoke(*args)
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
        return done

    def workspace(self, name: str) -> Path:
        ws = self.root / name
        shutil.copytree(STARTER_DIR, ws, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
        for path in (ws, *ws.rglob("*")):
            path.chmod(0o755 if path.is_dir() else 0o644)
        return ws

    def provision(self, name: str, runtime: str = "local") -> str:
        ws = self.workspace(name)
        args = ["--name", name, "--workspace", str(ws), "--runtime", runtime]
        done = self.ok("kit.provision", *args, "--description", "an echo agent that restarts")
        return done.stdout.strip()

    def record(self) -> dict[str, object]:
        data: dict[str, object] = json.loads((self.run_dir / service.RUN_FILE).read_text())
        return data

    def platform_pid(self) -> int:
        return int(str(self.record()["pid"]))

    def agents(self) -> list[str]:
        key = (self.run_dir / service.KEY_FILE).read_text().strip()
        url = str(self.record()["rest_url"])
        listed = httpx.get(f"{url}/api/v1/me/agents", headers={"x-api-key": key}, timeout=10)
        listed.raise_for_status()
        return [str(a["name"]) for a in listed.json()["data"]]


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def kill_platform(home: Home) -> None:
    """`kill -9` the run's platform and wait until it is gone."""
    pid = home.platform_pid()
    kill(pid)
    wait_for(lambda: not daemons.runs_module(pid, service.MODULE), 10, "the platform to die")


def agent_id_in(ws: Path) -> str:
    """The `agent.id` a workspace's band.yaml holds."""
    for line in (ws / "band.yaml").read_text().splitlines():
        if line.strip().startswith("id:"):
            return line.split(":", 1)[1].strip().strip("'\"")
    return ""
