"""The automated smoke on the docker runtime, as an operator runs it (`invoke smoke.run
--drills all`: auto picks docker here), on the smoke's own local platform: the sandbox's
network disconnected and reconnected, the container paused and unpaused, the Docker
daemon itself restarted, the platform restarted; every drill recovers, nothing is lost
and nothing is left (container, network, platform agents and rooms, stored keys,
processes). A canary user key never appears in the state, the report, the logs or the
output. A daemon drill whose recovery is broken on purpose (no relaunch) ends FAIL with
an observation that says what happened.

The daemon drill restarts this host's Docker daemon: the `daemon_back` fixture (conftest)
makes sure it answers again when each test ends, whatever happened (the rest of the
session needs it), and the drill itself refuses to run while other containers are up.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.ci.prepare import DOCKERD_LOG
from bandkit.dockercli import docker_answers
from bandkit.runtimes.docker import LABEL
from smoke import drills as dr
from smoke import run as smoke_run
from smoke.report import Verdict
from smoke.state import Label, Phase, SmokeState, StateStore
from tests import commands
from tests.runtimes.helpers import scratch_dir
from tests.smoke.support import (
    CANARY_USER_KEY,
    ROWS,
    all_text,
    assert_nothing_left,
    plant_user_key,
)

pytestmark = [pytest.mark.docker, pytest.mark.exclusive]
WATCHDOG_S = 10.0


@pytest.fixture
def run_dir() -> Iterator[Path]:
    path = scratch_dir("smoke-docker-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _state(run_dir: Path) -> SmokeState:
    state = StateStore(run_dir / "smoke").load()
    assert state is not None
    return state


def _labelled(sandbox: str) -> list[str]:
    """Containers and networks labelled as this sandbox's."""
    found = []
    for argv in (["ps", "--all"], ["network", "ls"]):
        done = subprocess.run(
            ["docker", *argv, "--filter", f"label={LABEL}={sandbox}", "--format", "{{.ID}}"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        found += done.stdout.split()
    return found


def _log_size() -> int:
    return DOCKERD_LOG.stat().st_size if DOCKERD_LOG.exists() else 0


def _new_daemon_log(since: int) -> str:
    if not DOCKERD_LOG.exists():
        return ""
    with DOCKERD_LOG.open("rb") as fh:
        fh.seek(since)
        return fh.read().decode(errors="replace")


@pytest.mark.timeout(600)
def test_full_smoke_on_docker_passes_every_drill_and_leaves_nothing(
    kit_image: str, run_dir: Path, daemon_back: None
) -> None:
    plant_user_key(run_dir)
    log_mark = _log_size()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BAND_")}
    # The agent's heartbeat watchdog at 10 s (the SDK's is 60 s): the network cut and the
    # freeze outlast it by the same margin, so the silent-socket path is the same, sooner.
    argv = ["smoke.run", "--drills", "all", "--image", kit_image, "--run-dir", str(run_dir)]
    argv += ["--watchdog", str(WATCHDOG_S)]
    done = commands.invoke(*argv, env=env, timeout=540)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "smoke.run: PASS" in done.stdout
    state = _state(run_dir)
    assert state.runtime == "docker"  # auto chose docker: a daemon answers, the image exists
    assert state.phase is Phase.COMPLETED
    latest = {p.label: p for p in state.probes}
    for label in Label:
        assert latest[label].passed, latest[label]
    for label in (Label.AFTER_WIFI_RECONNECT, Label.AFTER_SLEEP_WAKE, Label.AFTER_DAEMON_RESTART):
        assert "outage marker answered" in latest[label].detail  # nothing lost
    notes = state.observations
    for key in ("network_cut", "sleep_wake", "daemon_restart", "platform_restart"):
        assert "reconnect" in notes[key], notes[key]
        assert "after restore" in notes[key], notes[key]
    assert "disconnected from bandkit-" in notes["network_cut"]
    assert "with the same endpoint" in notes["network_cut"]
    assert "docker pause" in notes["sleep_wake"]
    assert f"SDK heartbeat watchdog: {WATCHDOG_S:g}s" in notes["sleep_wake"]
    assert "restarted dockerd" in notes["daemon_restart"]
    assert "the restart:" in notes["daemon_restart"]  # what happened to the container
    evidence = (run_dir / "smoke" / "evidence.md").read_text()
    assert "## Result\n\nPASS — phase: completed" in evidence
    for row in ROWS:
        assert f"| {row} | PASS |" in evidence
    assert_nothing_left(run_dir, state)
    assert _labelled(state.sandbox_name) == []
    assert CANARY_USER_KEY not in output
    assert CANARY_USER_KEY not in all_text(run_dir)
    assert CANARY_USER_KEY not in _new_daemon_log(log_mark)


@pytest.mark.timeout(300)
def test_daemon_drill_without_relaunch_fails_with_a_useful_observation(
    kit_image: str, run_dir: Path, daemon_back: None
) -> None:
    """The Docker daemon restart stops the container; recovery broken on purpose (no
    relaunch): FAIL, the observation says the container did not survive and was not
    relaunched, cleanup still reaps everything."""
    plant_user_key(run_dir)
    lines: list[str] = []
    options = smoke_run.Options(
        drills=[dr.Drill.DAEMON],
        runtime="docker",
        image=kit_image,
        relaunch=False,
        reconnect_timeout_s=20.0,
    )
    outcome = smoke_run.run_all(run_dir, options, log=lines.append)
    assert docker_answers()  # the drill put the daemon back
    assert outcome.verdict is Verdict.FAIL
    assert [(r.drill, r.passed) for r in outcome.results] == [(dr.Drill.DAEMON, False)]
    state = _state(run_dir)
    assert state.phase is Phase.FAILED
    latest = {p.label: p for p in state.probes}
    assert latest[Label.INITIAL].passed
    assert not latest[Label.AFTER_DAEMON_RESTART].passed
    assert "did not reconnect" in latest[Label.AFTER_DAEMON_RESTART].detail
    note = state.observations["daemon_restart"]
    assert "NOT RECOVERED: the sandbox's processes are gone" in note
    assert "did not survive the restart" in note
    assert "not relaunched (recovery broken on purpose)" in note
    assert latest[Label.CLEANUP].passed
    evidence = (run_dir / "smoke" / "evidence.md").read_text()
    assert "| Daemon restart | FAIL |" in evidence
    assert_nothing_left(run_dir, state)
    assert _labelled(state.sandbox_name) == []
    assert CANARY_USER_KEY not in "\n".join(lines)
    assert CANARY_USER_KEY not in all_text(run_dir)
