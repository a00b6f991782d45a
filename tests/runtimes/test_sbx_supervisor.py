"""The sbx 0.43+ supervisor: deterministic backoff, the restart loop (injected), the pid
file's identity check (never a signal to a pid it cannot prove is its own), and, on the
simulated 0.47 with a short idle stop, a shell sandbox the runtime keeps running: survives
idle, is not restarted after `stop`, comes back after its `sbx run` or the supervisor
itself is killed, and leaves nothing after teardown. Without the supervisor it stops."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit import processes
from bandkit.manifest import Kind, Manifest, teardown
from bandkit.runtimes.base import SandboxSpec, SandboxStatus
from bandkit.runtimes.sbx import SbxRuntime, supervisor
from bandkit.runtimes.select import removers
from tests.fakes.simharness import Sim, simulator, watchers
from tests.support.wait import wait_for

# The simulator's idle stop: a re-attach (0.5 s backoff, then an `sbx run` that starts
# Python) must fit in it with room to spare on a loaded machine.
IDLE_S = 3.0
ATTACHED = "Attached to sandbox box"  # what the sim's `sbx run` prints once attached
CANARY = "canary-user-key-sup-6d1e0b3a"


# -- backoff and the loop (no processes) ------------------------------------------------


def test_backoff_is_deterministic_and_capped() -> None:
    backoff = supervisor.Backoff(base=0.5, factor=2, cap=4)
    assert [backoff.delay(n) for n in range(6)] == [0.5, 1, 2, 4, 4, 4]


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def loop(
    runs: list[tuple[int, float]], *, listed: bool = True, **backoff: float
) -> tuple[int, list[float], int, str]:
    """A Supervisor whose attach returns `runs` (exit code, seconds attached) in turn."""
    clock = FakeClock()
    plan = iter(runs)
    sup: supervisor.Supervisor

    def attach(argv: object) -> int:
        try:
            code, seconds = next(plan)
        except StopIteration:
            sup.stopping = True  # the test is over: as if SIGTERM arrived
            return 0
        clock.now += seconds
        return code

    log_r, log_w = os.pipe()
    sup = supervisor.Supervisor(
        "box",
        log_fd=log_w,
        backoff=supervisor.Backoff(**backoff),  # type: ignore[arg-type]
        attach=attach,
        listed=lambda: listed,
        sleep=clock.sleep,
        clock=lambda: clock.now,
    )
    code = sup.run()
    os.close(log_w)
    with os.fdopen(log_r, "rb") as fh:
        log = fh.read().decode()
    return code, clock.slept, sup.runs, log


def test_restarts_back_off_and_a_healthy_run_resets_them() -> None:
    code, slept, runs, log = loop(
        [(1, 0.1), (1, 0.1), (1, 0.1), (0, 60.0), (1, 0.1)], base=1, factor=2, healthy_s=30
    )
    assert code == 0
    assert slept == [1, 2, 4, 1, 1]  # after the 60 s run the delays start again
    assert runs == 6
    assert "sbx run exited 1; restarting in 2s" in log
    assert "attaching: sbx run --name box (run 1)" in log


def test_gives_up_after_max_failures_in_a_row() -> None:
    code, slept, runs, log = loop([(1, 0.0)] * 10, base=1, factor=1, max_failures=3)
    assert code == 1
    assert slept == [1, 1, 1]
    assert runs == 4
    assert "gave up after 3 restarts in a row (last exit 1)" in log


def test_exits_when_the_sandbox_is_not_listed() -> None:
    code, slept, runs, log = loop([(0, 1.0)], listed=False)
    assert (code, slept, runs) == (0, [], 1)
    assert "sandbox box is not listed any more" in log


# -- the pid file's identity check --------------------------------------------------------


def _pid_file(directory: Path, pid: int, tag: str, started: str | None) -> None:
    path, _ = supervisor.paths(directory, "box")
    supervisor.private_dir(path.parent)
    path.write_text(json.dumps({"pid": pid, "start_time": started, "tag": tag}))


@pytest.fixture
def stranger() -> Iterator[subprocess.Popen[bytes]]:
    """A process that is not ours to signal (no tag)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def test_never_signals_a_pid_it_cannot_prove_is_its_own(
    tmp_path: Path, stranger: subprocess.Popen[bytes]
) -> None:
    tag = "sbx/supervisor/box/test"
    # The right start time but no tag in its environment (a reused pid, say).
    _pid_file(tmp_path, stranger.pid, tag, supervisor.start_time(stranger.pid))
    assert supervisor.verified_pid(tmp_path, "box", tag) is None
    assert supervisor.stop("box", directory=tmp_path, tag=tag) is False
    assert stranger.poll() is None
    # A pid file for another tag, and a planted link, prove nothing either.
    _pid_file(tmp_path, stranger.pid, "sbx/supervisor/other/x", "1")
    assert supervisor.verified_pid(tmp_path, "box", tag) is None
    pid_file, _ = supervisor.paths(tmp_path, "box")
    pid_file.unlink()
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"pid": stranger.pid, "start_time": "1", "tag": tag}))
    pid_file.symlink_to(target)
    assert supervisor.verified_pid(tmp_path, "box", tag) is None
    supervisor.stop("box", directory=tmp_path, tag=tag)
    assert stranger.poll() is None
    assert target.exists()
    assert not pid_file.is_symlink()


# -- the runtime on simulated 0.47 (a shell sandbox: no agent) ---------------------------


@pytest.fixture
def sim(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sim]:
    with simulator("0.47.0", idle_s=IDLE_S) as s:
        s("policy", "init", "balanced", check=True)
        for key, value in s.env.items():
            monkeypatch.setenv(key, value)
        yield s


def sup_pid(rt: SbxRuntime, name: str) -> int | None:
    return supervisor.verified_pid(rt.supervisors_dir, name, rt.supervisor_tag(name))


def attach_pids(sim: Sim) -> list[int]:
    """Pids of `sbx run` sessions (the supervisor's children)."""
    marker = f"SBX_SIM_STATE={sim.state}".encode()

    def session(p: processes.Proc) -> bool:
        cmd = p.cmdline.rstrip(b"\0").split(b"\0")
        return cmd[-3:] == [b"run", b"--name", b"box"] and marker in p.environ

    return processes.scan(session)


def environ(pid: int) -> bytes:
    return b"\0".join(processes.environ(pid) or ())


@pytest.mark.e2e  # a restart drill: the agent's session and supervisor killed, restarted
def test_the_supervised_sandbox_survives_idle_and_restarts(
    sim: Sim, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BAND_API_KEY_USER", CANARY)  # the task's key: never the supervisor's
    monkeypatch.setenv("SOME_API_TOKEN", CANARY)
    ws = sim.workspace()
    manifest_path = tmp_path / "run" / "manifest.json"
    with Manifest.open(manifest_path) as manifest:
        rt = SbxRuntime(manifest=manifest, kits_dir=tmp_path / "run" / "sbx" / "kits")
        rt.create(SandboxSpec(name="box", workspaces=(ws,)))
        tag = rt.supervisor_tag("box")
        entry = manifest.find(Kind.PROCESS, tag)
        assert entry is not None
        assert entry.details["runtime"] == "sbx"
        first = sup_pid(rt, "box")
        assert first is not None
        wait_for(lambda: attach_pids(sim), 10, "the attached sbx run")
        for pid in [first, *attach_pids(sim)]:
            assert CANARY.encode() not in environ(pid)
        time.sleep(IDLE_S * 2)  # the property: still running after twice the idle stop
        assert rt.status("box") is SandboxStatus.RUNNING

        # Its `sbx run` killed: the supervisor attaches again (backoff 0.5 s).
        for pid in attach_pids(sim):
            os.kill(pid, signal.SIGKILL)
        _, log = supervisor.paths(rt.supervisors_dir, "box")
        wait_for(lambda: "(run 2)" in log.read_text(), 10, "the restart")
        time.sleep(IDLE_S * 1.5)
        assert rt.status("box") is SandboxStatus.RUNNING

        # The supervisor itself killed: the next status() replaces it (the old pid proves
        # nothing any more), and start() keeps the live one.
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: sup_pid(rt, "box") is None, 10, "the supervisor to die")
        assert rt.status("box") is SandboxStatus.RUNNING
        assert any("had died" in w for w in rt.warnings)
        second = sup_pid(rt, "box")
        rt.start("box")
        assert sup_pid(rt, "box") == second
        assert second is not None
        assert second != first
        time.sleep(IDLE_S * 1.5)
        assert rt.status("box") is SandboxStatus.RUNNING

        # stop: the supervisor goes first, so nothing starts the sandbox again.
        rt.stop("box")
        assert sup_pid(rt, "box") is None
        time.sleep(IDLE_S)
        assert rt.status("box") is SandboxStatus.STOPPED
        attached = log.read_text().count(ATTACHED)
        rt.start("box")
        # The new supervisor's `sbx run` holds it; under load the exec's boot may idle out
        # before that run attaches, and the attach starts it again.
        wait_for(lambda: log.read_text().count(ATTACHED) > attached, 10, "the new attach")
        assert rt.status("box") is SandboxStatus.RUNNING
        assert sup_pid(rt, "box") is not None
        assert "sbx run --name box" in rt.logs("box").startup

        report = teardown(manifest, removers([rt]))
        assert report.clean, report.lines()
        assert {r.kind for r in report.removed} == {Kind.SANDBOX, Kind.PROCESS}
    assert not manifest_path.exists()
    assert rt.list() == []
    assert processes.tagged_pids(tag) == []
    assert not attach_pids(sim)
    assert not (rt.supervisors_dir / "box").exists()
    wait_for(lambda: not watchers(sim.state), 5, "the idle watchers to exit")


def test_without_the_supervisor_the_sandbox_auto_stops(sim: Sim) -> None:
    rt = SbxRuntime(supervise=False)
    rt.create(SandboxSpec(name="box", workspaces=(sim.workspace(),)))
    try:
        assert rt.status("box") is SandboxStatus.RUNNING
        wait_for(lambda: rt.status("box") is SandboxStatus.STOPPED, IDLE_S + 10, "idle stop")
    finally:
        rt.remove("box")


def test_below_043_no_supervisor_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with simulator("0.35.0") as sim:
        sim("policy", "init", "balanced", check=True)
        for key, value in sim.env.items():
            monkeypatch.setenv(key, value)
        rt = SbxRuntime(supervisors_dir=tmp_path / "sup")
        rt.create(SandboxSpec(name="old", workspaces=(sim.workspace(),)))
        try:
            assert not rt.supervised
            assert not (tmp_path / "sup").exists()
            assert not any(c["argv"][:1] == ["run"] for c in _calls(sim))
        finally:
            rt.remove("old")


def _calls(sim: Sim) -> list[dict[str, list[str]]]:
    lines = (sim.state / "calls.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]
