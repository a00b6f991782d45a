"""`invoke demo.up` end to end, offline, on the local runtime: three real agents (the kit
launcher, their own locked venvs, the real band-sdk Agent with the scripted brain) on the
local emulator. For each scenario: the expected breaker tier fires, the transcript shows
it, the exit code says it, and afterwards nothing is left (platform agents and rooms,
processes, staged workspaces, manifest). The canary user key never appears anywhere.
The docker runtime's runs are in tests/docker/test_demo_docker.py; `kill -9` at each
phase in tests/demo/test_demo_kill.py.

The module shares one run directory (warm uv caches after the first run) and one
emulator started like `platform.up`, with the canary key planted as its key file.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bandkit.demo import teardown
from bandkit.demo.layout import DemoLayout
from bandkit.demo.phases import PHASES
from bandkit.emulator import service
from examples.docker_demo.cast import DEMO_NAMES
from tests import commands
from tests.runtimes.helpers import REPO, agent_sdk_env, scratch_dir

pytestmark = pytest.mark.slow

CANARY = "canary-user-key-demo-77b1c0e4"
AGENT_KEY_PREFIX = "band_a_"  # every emulator agent key starts so
SKIPPED_DIRS = {".uv-cache", ".sdk", "cli", "keychain"}  # caches (keyless), the key store
TIMINGS = re.compile(r"demo\.up: timings: (?P<body>.*); exit code (?P<code>\d+)")


@dataclass
class Platform:
    run_dir: Path
    rest_url: str
    layout: DemoLayout

    def get(self, path: str) -> list[dict[str, object]]:
        response = httpx.get(self.rest_url + path, headers={"x-api-key": CANARY}, timeout=10)
        response.raise_for_status()
        return list(response.json()["data"])


@pytest.fixture(scope="module")
def platform() -> Iterator[Platform]:
    with agent_sdk_env():
        run_dir = scratch_dir("demo-e2e-")
        key_file = run_dir / service.KEY_FILE
        key_file.write_text(CANARY + "\n")
        key_file.chmod(0o600)
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


def demo_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BAND_", "DEMO_"))}
    return {**env, "PYTHONUNBUFFERED": "1", "DEMO_GRACE_S": "0.5", **extra}


def invoke(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return commands.invoke(*args, env=env)


def up(
    platform: Platform, scenario: str, *flags: str, **env: str
) -> subprocess.CompletedProcess[str]:
    args = ["demo.up", "--runtime", "local", "--headless", "--scenario", scenario]
    return invoke(*args, *flags, "--run-dir", str(platform.run_dir), env=demo_env(**env))


def tagged_processes(box_root: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(b"BANDKIT_TAG=") and str(box_root).encode() in e for e in environ):
            found.append(int(entry.name))
    return found


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


def test_no_handoff_nudges_then_the_conductor_adds_the_architect(platform: Platform) -> None:
    done = up(platform, "no-handoff")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "conductor: soft cap reached without a handoff: nudging the PM" in out
    assert "conductor: handoff deadline passed: adding Jordan (Architect)" in out
    assert out.index("nudging the PM") < out.index("adding Jordan") < out.index("VERDICT:")
    assert "demo.up: verdict: decided (architect verdict)" in out
    assert_nothing_left(platform, done)


def test_happy_hands_off_and_rules_within_the_targets(platform: Platform) -> None:
    started = time.monotonic()
    done = up(platform, "happy")
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "Maya (PM) → Jordan (Architect)" in out
    assert "conductor: Jordan (Architect) is in the room" in out
    assert "Jordan (Architect) → Maya (PM), Sam (Dev): @Maya (PM) @Sam (Dev) VERDICT:" in out
    assert "nudging" not in out
    assert "adding Jordan" not in out
    shown = re.findall(r"^demo\.up: phase ([^:]+):", out, re.MULTILINE)
    assert shown == list(PHASES)  # one progress line per phase, in order
    measured = timings(done)
    print(f"happy on local: {measured} (command to exit {wall:.1f} s)")
    # Targets: verdict <= 30 s on local, teardown <= 10 s (a cold cache may double them).
    assert measured["verdict"] <= 60
    assert measured["teardown"] <= 20
    assert_nothing_left(platform, done)


def test_runaway_is_hard_killed_on_the_cap(platform: Platform) -> None:
    done = up(platform, "runaway")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "conductor: hard_kill: hard cap of 24 messages reached" in done.stdout
    assert "Meeting stopped by the circuit breaker" in done.stdout
    assert "VERDICT:" not in done.stdout
    assert_nothing_left(platform, done)


def test_slow_is_stopped_by_the_wall_clock(platform: Platform) -> None:
    done = up(platform, "slow", DEMO_WALL_CLOCK_S="6")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "conductor: hard_kill: wall clock of 6 s reached" in done.stdout
    assert_nothing_left(platform, done)


def test_a_silent_architect_is_stopped_by_the_wall_clock(platform: Platform) -> None:
    done = up(platform, "silent-architect", DEMO_WALL_CLOCK_S="5")
    assert done.returncode == 4, done.stdout + done.stderr
    out = done.stdout
    assert "conductor: Jordan (Architect) is in the room" in out
    assert "nudging" not in out
    assert "adding Jordan" not in out
    assert "wall clock of 5 s reached" in out
    assert_nothing_left(platform, done)


def test_the_presenter_ends_it_early(platform: Platform) -> None:
    done = up(platform, "presenter-end", DEMO_POLL_INTERVAL_S="2.5")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "(pushes; polling every 2.5 s if it drops)" in done.stdout  # DEMO_POLL_INTERVAL_S
    assert "presenter: Thanks, both." in done.stdout
    assert "conductor: terminate_ok: presenter ended the meeting" in done.stdout
    assert_nothing_left(platform, done)


def test_keep_then_status_logs_and_down(platform: Platform) -> None:
    done = up(platform, "happy", "--keep")
    assert done.returncode == 0, done.stdout + done.stderr
    layout = platform.layout
    status = invoke("demo.status", "--run-dir", str(platform.run_dir), env=demo_env())
    assert status.returncode == 0, status.stderr
    assert "sandbox band-demo-pm (Maya (PM)): running" in status.stdout
    assert "room page: http://127.0.0.1:" in status.stdout
    logs = invoke(
        "demo.logs",
        "--role",
        "pm",
        "--lines",
        "400",
        "--run-dir",
        str(platform.run_dir),
        env=demo_env(),
    )
    assert "demo agent ready" in logs.stdout
    chains = (layout.runtimes / "local" / "keychain").glob("*.json")
    agent_keys = [entry["value"] for chain in chains for entry in json.loads(chain.read_text())]
    assert len(agent_keys) == 3
    running = "\n".join(
        [done.stdout, status.stdout, logs.stdout, texts(platform.run_dir, layout.box_root)]
    )
    for secret in (CANARY, *agent_keys):
        assert secret not in running
    again = up(platform, "happy")
    assert again.returncode == 1
    assert "unfinished demo run" in again.stderr
    down = invoke("demo.down", "--run-dir", str(platform.run_dir), env=demo_env())
    assert down.returncode == 0, down.stdout + down.stderr
    assert "teardown: removed room:" in down.stdout
    assert_nothing_left(platform, down)
    twice = invoke("demo.down", "--run-dir", str(platform.run_dir), env=demo_env())
    assert "nothing to remove" in twice.stdout


def test_sigterm_mid_meeting_tears_everything_down(platform: Platform) -> None:
    argv = [
        sys.executable,
        "-m",
        "invoke",
        "demo.up",
        "--runtime",
        "local",
        "--headless",
        "--scenario",
        "slow",
        "--run-dir",
        str(platform.run_dir),
    ]
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=demo_env(DEMO_WALL_CLOCK_S="120"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    seen = []
    for line in process.stdout:
        seen.append(line)
        if "conductor → Maya (PM)" in line:
            break
    process.send_signal(signal.SIGTERM)
    rest, err = process.communicate(timeout=120)
    out = "".join(seen) + rest
    assert process.returncode == 130, out + err
    assert "demo.up: interrupted during the meeting phase; tearing down" in out
    assert_nothing_left(platform, subprocess.CompletedProcess(argv, 130, out, err))


def test_an_emulator_the_demo_started_is_stopped_again(platform: Platform) -> None:
    run_dir = scratch_dir("demo-own-emu-")
    key_file = run_dir / service.KEY_FILE
    key_file.write_text(CANARY + "\n")
    key_file.chmod(0o600)
    layout = DemoLayout.for_run_dir(run_dir)
    try:
        args = ["demo.up", "--runtime", "local", "--headless", "--scenario", "presenter-end"]
        done = invoke(*args, "--run-dir", str(run_dir), env=demo_env())
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"teardown: removed process:emulator:{run_dir}" in done.stdout
        assert service.running(run_dir) is None  # stopped, and its run file removed
        assert not layout.manifest.exists()
        assert tagged_processes(layout.box_root) == []
        assert CANARY not in done.stdout + done.stderr + texts(run_dir, layout.box_root)
    finally:
        teardown.down(run_dir, env={}, log=print)
        service.down(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
        if layout.box_root != run_dir / "demo-boxes":
            shutil.rmtree(layout.box_root, ignore_errors=True)
