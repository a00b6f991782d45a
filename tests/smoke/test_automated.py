"""The automated smoke end to end on the local runtime and the smoke's own local platform
(127.0.0.1 only): every drill recovers and nothing is left behind; a recovery broken on
purpose ends FAIL with an observation that says why; the user key never leaks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandkit.runtimes import processes
from smoke import drills as dr
from smoke import run as smoke_run
from smoke.report import Verdict
from smoke.state import Label, Phase, SmokeState, StateStore
from tests.runtimes.helpers import REPO
from tests.smoke.conftest import CANARY_USER_KEY, all_text, plant_user_key

pytestmark = pytest.mark.slow

ROWS = ("Initial round trip", "Network cut", "Sleep/wake", "Daemon restart")


def _state(run_dir: Path) -> SmokeState:
    state = StateStore(run_dir / "smoke").load()
    assert state is not None
    return state


def _processes_of(run_dir: Path) -> list[int]:
    """Pids of processes of this run dir: box and proxy processes (tagged with a path
    under it) and the platform (its argv names files under it)."""
    marker = str(run_dir).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        tags = [v for v in environ.split(b"\0") if v.startswith(processes.TAG_ENV.encode())]
        if any(marker in tag for tag in tags) or marker in cmdline:
            found.append(int(entry.name))
    return found


def assert_nothing_left(run_dir: Path, state: SmokeState) -> None:
    assert state.unreaped == []
    assert (state.agent_id, state.room_id) == ("", "")
    assert not list((run_dir / "smoke-kit").rglob("manifest.json"))
    assert not list((run_dir / "smoke-kit").rglob("keychain/*.json"))
    assert not (run_dir / "smoke-kit" / "workspaces" / state.run_id).exists()
    assert not (run_dir / "smoke-platform" / "platform.json").exists()  # platform stopped
    assert not (run_dir / "smoke-platform" / "platform-user-key").exists()
    assert _processes_of(run_dir) == []
    assert state.observations["leftovers"].startswith("none")


def test_full_smoke_passes_every_drill_and_leaves_nothing(run_dir: Path, agent_sdk: None) -> None:
    """`invoke smoke.run --drills all --runtime local` as an operator runs it (auto would
    pick docker where a daemon answers: tests/docker covers that), with a canary user key."""
    plant_user_key(run_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAND_")}
    done = subprocess.run(
        [
            *(sys.executable, "-m", "invoke", "smoke.run", "--drills", "all"),
            *("--runtime", "local", "--run-dir", str(run_dir)),
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "smoke.run: PASS" in done.stdout
    state = _state(run_dir)
    assert state.phase is Phase.COMPLETED
    latest = {p.label: p for p in state.probes}
    for label in (
        Label.PROVISION,
        Label.INITIAL,
        Label.AFTER_WIFI_RECONNECT,
        Label.AFTER_SLEEP_WAKE,
        Label.AFTER_DAEMON_RESTART,
        Label.AFTER_PLATFORM_RESTART,
        Label.CLEANUP,
    ):
        assert latest[label].passed, latest[label]
    for label in (Label.AFTER_WIFI_RECONNECT, Label.AFTER_SLEEP_WAKE, Label.AFTER_DAEMON_RESTART):
        assert "outage marker answered" in latest[label].detail  # nothing lost
    for key in ("network_cut", "sleep_wake", "daemon_restart", "platform_restart"):
        assert "reconnect" in state.observations[key]
        assert "after restore" in state.observations[key]
    evidence = (run_dir / "smoke" / "evidence.md").read_text()
    assert "## Result\n\nPASS — phase: completed" in evidence
    for row in ROWS:
        assert f"| {row} | PASS |" in evidence
    assert_nothing_left(run_dir, state)
    # The canary user key is nowhere: output, state, report, logs (the platform's too).
    assert CANARY_USER_KEY not in output
    assert CANARY_USER_KEY not in all_text(run_dir)


def test_broken_reconnect_fails_the_network_drill_with_a_useful_observation(
    run_dir: Path, agent_sdk: None
) -> None:
    """The smoke agent's knob makes its first disconnect terminal: the network drill must
    end FAIL, say the agent did not come back and why, and still clean up."""
    plant_user_key(run_dir)
    lines: list[str] = []
    options = smoke_run.Options(
        drills=[dr.Drill.NETWORK],
        agent_env={"SMOKE_AGENT_NO_RECONNECT": "1"},
        reconnect_timeout_s=20.0,
    )
    outcome = smoke_run.run_all(run_dir, options, log=lines.append)
    assert outcome.verdict is Verdict.FAIL
    assert outcome.exit_code == 1
    assert [(r.drill, r.passed) for r in outcome.results] == [(dr.Drill.NETWORK, False)]
    state = _state(run_dir)
    assert state.phase is Phase.FAILED
    latest = {p.label: p for p in state.probes}
    assert latest[Label.INITIAL].passed
    assert not latest[Label.AFTER_WIFI_RECONNECT].passed
    assert "did not reconnect" in latest[Label.AFTER_WIFI_RECONNECT].detail
    note = state.observations["network_cut"]
    assert "NOT RECOVERED" in note
    assert "processes are gone" in note  # the agent exited instead of reconnecting
    assert "Reconnect suppressed" in note  # from the agent's own log tail
    assert latest[Label.CLEANUP].passed
    evidence = (run_dir / "smoke" / "evidence.md").read_text()
    assert "| Network cut | FAIL |" in evidence
    assert "## Result\n\nFAIL" in evidence
    assert_nothing_left(run_dir, state)
    assert CANARY_USER_KEY not in "\n".join(lines)
    assert CANARY_USER_KEY not in all_text(run_dir)
    json.loads((run_dir / "smoke" / "state.json").read_text())  # still a valid state
