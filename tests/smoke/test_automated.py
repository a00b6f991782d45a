"""The automated smoke end to end on the local runtime and the smoke's own local platform
(127.0.0.1 only): from a fresh clone after `platform.up` (a private `.run`) every drill
recovers and nothing is left behind; a recovery broken on purpose ends FAIL with an
observation that says why; the user key never leaks."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from bandkit.runtimes.local import BOXES_HOME
from smoke import drills as dr
from smoke import run as smoke_run
from smoke.report import Verdict
from smoke.state import Label, Phase, SmokeState, StateStore
from tests.smoke.support import (
    CANARY_USER_KEY,
    ROWS,
    all_text,
    assert_nothing_left,
    local_boxes,
    plant_user_key,
)
from tests.support.readme import run

pytestmark = pytest.mark.e2e


def _state(run_dir: Path) -> SmokeState:
    state = StateStore(run_dir / "smoke").load()
    assert state is not None
    return state


def test_full_smoke_after_platform_up_passes_every_drill_and_leaves_nothing(clone: Path) -> None:
    """In a fresh clone, `uv run invoke platform.up` (which makes `.run` 0700: as root the
    box uid cannot enter it) then `uv run invoke smoke.run --drills all --runtime local` in
    the default run directory, with a canary user key (auto would pick docker where a
    daemon answers and the kit image is built: tests/docker covers that)."""
    run("uv run invoke platform.up", clone)
    run_dir = clone / ".run"
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    plant_user_key(run_dir)
    boxes = local_boxes(run_dir)
    assert boxes.is_relative_to(BOXES_HOME) == (os.geteuid() == 0)  # as root: outside .run
    try:
        _smoke_passes_and_leaves_nothing(clone, run_dir)
    finally:
        if boxes.is_relative_to(BOXES_HOME):  # outside the clone: its rmtree misses it
            shutil.rmtree(boxes, ignore_errors=True)


def _smoke_passes_and_leaves_nothing(clone: Path, run_dir: Path) -> None:
    done = run("uv run invoke smoke.run --drills all --runtime local", clone)
    output = done.stdout + done.stderr
    run("uv run invoke platform.down", clone)  # the README's; the smoke stops its own
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
