"""`invoke demo.up` end to end, offline, on the local runtime: three real agents (the kit
launcher, their own locked venvs, the real band-sdk Agent with the scripted brain) on the
local emulator. For each breaker tier (one scenario per exit code, and the nudge and
add): it fires, the transcript shows it, the exit code says it, and afterwards nothing is
left (platform agents and rooms, processes, staged workspaces, manifest). The canary user
key never appears anywhere. `silent-architect` ends on the same wall-clock tier as
`slow`; the scenario tables (tests/demo/test_scenarios.py) prove it reaches that tier.
The docker runtime's runs are in tests/docker/test_demo_docker.py; `kill -9` at each
distinct state of a run in tests/demo/test_demo_kill.py.

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

import pytest

from bandkit import processes
from bandkit.demo import teardown
from bandkit.demo.layout import DemoLayout
from bandkit.demo.phases import PHASES
from bandkit.emulator import service
from bandkit.runtimes import hostbox
from tests.demo.support import (
    CANARY,
    REPO,
    Platform,
    assert_nothing_left,
    box_uids,
    demo_env,
    invoke,
    local_box,
    tagged_processes,
    texts,
    timings,
    uid_of,
    up,
)
from tests.runtimes.helpers import scratch_dir

pytestmark = pytest.mark.e2e


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
    uids = box_uids(layout)
    if os.geteuid() == 0:  # as root the three boxes are three uids, each its own agent's
        assert len(set(uids.values())) == 3, uids
        for sandbox, uid in uids.items():
            agent = processes.tagged_pids(hostbox.box_tag(local_box(layout, sandbox)))
            assert agent, sandbox
            assert {uid_of(pid) for pid in agent} == {uid}, sandbox
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
    if os.geteuid() == 0:
        assert [u for u in uids.values() if processes.uid_pids(u)] == []
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
