"""The simulator's sbx 0.43+ attach model (docs/sbx-cli.md 1.1, 1.2 `run`, 1.3 item 7):
an unattached sandbox stops after the idle time, `sbx run --name N` on a terminal holds it
running, a killed session counts as detached at once, `stop`/`rm` end a session, 0.35 does
not auto-stop, and from 0.42.1 `create` decodes the kit with the new decoder."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import termios
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from bandkit.kit import spec_source
from tests.fakes.simharness import Sim, simulator, watchers
from tests.support.wait import wait_for

IDLE_S = 1.5
POLL_S = 0.05  # how often the waits below look


def status(sim: Sim, name: str) -> str:
    rows = json.loads(sim("ls", "--json").stdout).get("sandboxes") or []
    return next((str(r["status"]) for r in rows if r["name"] == name), "absent")


def _ctty() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


@contextmanager
def attached(sim: Sim, name: str) -> Iterator[subprocess.Popen[bytes]]:
    """`sbx run --name NAME` with a pty as its terminal (what a terminal or tmux gives)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(
        ["sbx", "run", "--name", name],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=sim.env,
        start_new_session=True,
        preexec_fn=_ctty,
    )
    os.close(slave)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
        os.close(master)


def sessions(sim: Sim, name: str) -> list[Path]:
    sid = json.loads(sim("ls", "--json").stdout)["sandboxes"][0]["id"]
    return sorted((sim.state / "sessions" / sid).glob("*.lock"))


@pytest.fixture
def sim47() -> Iterator[Sim]:
    with simulator("0.47.0", idle_s=IDLE_S) as s:
        s("policy", "init", "balanced", check=True)
        yield s


def test_an_unattached_sandbox_stops_after_the_idle_time(sim47: Sim) -> None:
    started = time.monotonic()
    sim47("create", "--name", "idle", "shell", str(sim47.workspace()), check=True)
    assert status(sim47, "idle") == "running"
    wait_for(lambda: status(sim47, "idle") == "stopped", IDLE_S + 10, "the idle stop", POLL_S)
    assert time.monotonic() - started >= IDLE_S
    assert (
        "idle: no attached session for 1.5s, stopped" in (sim47.state / "autostop.log").read_text()
    )
    wait_for(lambda: not watchers(sim47.state), 5, "the watcher to exit", POLL_S)


def test_an_attached_session_holds_it_running_and_a_killed_one_lets_it_stop(sim47: Sim) -> None:
    sim47("create", "--name", "held", "shell", str(sim47.workspace()), check=True)
    with attached(sim47, "held") as session:
        wait_for(lambda: len(sessions(sim47, "held")) == 1, 10, "the session", POLL_S)
        time.sleep(IDLE_S * 2)  # the property under test is "still running after idle"
        assert status(sim47, "held") == "running"
        session.send_signal(signal.SIGKILL)
        session.wait(timeout=10)
        killed = time.monotonic()
        wait_for(lambda: status(sim47, "held") == "stopped", IDLE_S + 10, "stop", POLL_S)
        waited = time.monotonic() - killed
    assert waited >= IDLE_S - 0.3  # the idle clock starts when the session ends


def test_stop_and_rm_end_an_attached_session(sim47: Sim) -> None:
    ws = str(sim47.workspace())
    sim47("create", "--name", "ends", "shell", ws, check=True)
    with attached(sim47, "ends") as session:
        wait_for(lambda: len(sessions(sim47, "ends")) == 1, 10, "the session", POLL_S)
        sim47("stop", "ends", check=True)
        assert session.wait(timeout=10) == 0
    with attached(sim47, "ends") as session:  # run --name starts a stopped sandbox
        wait_for(lambda: status(sim47, "ends") == "running", 10, "the start", POLL_S)
        sim47("rm", "-f", "ends", check=True)
        assert session.wait(timeout=10) == 0


def test_run_needs_a_terminal(sim47: Sim) -> None:
    sim47("create", "--name", "tty", "shell", str(sim47.workspace()), check=True)
    result = sim47("run", "--name", "tty")
    assert result.returncode == 1
    assert "the input device is not a TTY" in result.stderr


def test_035_does_not_auto_stop() -> None:
    with simulator("0.35.0", idle_s=0.5) as sim:
        sim("policy", "init", "balanced", check=True)
        sim("create", "--name", "old", "shell", str(sim.workspace()), check=True)
        assert not watchers(sim.state)
        time.sleep(1.5)  # three idle times: 0.35 has no idle stop at all
        assert status(sim, "old") == "running"


def _kit(sim: Sim, text: str, name: str) -> str:
    kit = sim.scratch / name
    kit.mkdir()
    (kit / "spec.yaml").write_text(text)
    return str(kit)


def test_create_decodes_the_kit_by_version(sim47: Sim) -> None:
    ws = str(sim47.workspace())
    legacy = _kit(sim47, spec_source.LEGACY_PATH.read_text(), "legacy")
    refused = sim47("create", "--name", "k1", legacy, ws)
    assert refused.returncode == 1
    assert "field caps not found in type spec.specFileV2" in refused.stderr
    current = _kit(sim47, spec_source.CURRENT_PATH.read_text(), "current")
    sim47("create", "--name", "k2", current, ws, check=True)
    state = json.loads((sim47.state / "state.json").read_text())["sandboxes"]["k2"]
    assert state["entrypoint"] is True  # runs on attach only
    assert yaml.safe_load(Path(current, "spec.yaml").read_text())["sandbox"]["entrypoint"]
