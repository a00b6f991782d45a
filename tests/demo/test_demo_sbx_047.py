"""`invoke demo.up --runtime sbx --scenario happy` on simulated sbx 0.47 (short idle
auto-stop): the kit is staged in the current shape, each sandbox is kept attached by its
supervisor across the meeting, the verdict is reached, and teardown stops the supervisors
and removes the sandboxes: nothing of the run is left (sandboxes, sessions, supervisor
processes, manifest), and the canary user key never shows up."""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit import processes
from bandkit.demo import teardown
from bandkit.demo.layout import DemoLayout
from bandkit.emulator import service
from tests.demo.support import Live
from tests.fakes.simharness import Sim, simulator, watchers
from tests.runtimes.helpers import scratch_dir
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e


CANARY = "canary-user-key-demo47-3c81f0aa"
IDLE_S = 3.0


@pytest.fixture(scope="module")
def run_dir(agent_sdk: None) -> Iterator[Path]:
    path = scratch_dir("demo47-")
    key_file = path / service.KEY_FILE
    key_file.write_text(CANARY + "\n")
    key_file.chmod(0o600)
    service.up(path)
    try:
        yield path
    finally:
        teardown.down(path, env={}, log=print)  # whatever a failed test left
        service.down(path)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def sim() -> Iterator[Sim]:
    with simulator("0.47.0", idle_s=IDLE_S) as s:
        s("policy", "init", "balanced", check=True)
        yield s


def supervisors() -> list[int]:
    """Live processes tagged as a demo sandbox's sbx supervisor."""
    return processes.tagged_pids("sbx/supervisor/band-demo-", prefix=True)


def test_happy_on_simulated_047(run_dir: Path, sim: Sim) -> None:
    """Followed from "another terminal" too: `demo.logs --follow` reads each supervisor's
    attach log (the agent's output) and the launcher log in the sandbox, and ends with the
    run."""
    env = {k: v for k, v in sim.env.items() if not k.startswith(("BAND_", "DEMO_"))}
    env |= {"PYTHONUNBUFFERED": "1", "DEMO_GRACE_S": "2"}
    invoke = (sys.executable, "-m", "invoke")
    where = ("--run-dir", str(run_dir))
    run = Live(
        [*invoke, "demo.up", "--runtime", "sbx", "--headless", "--scenario", "happy", *where],
        env=env,
        timeout_s=600,
    )
    follow: Live | None = None
    try:
        wait_for(lambda: run.line_or_end(lambda t: "logs --follow" in t), 300, "the logs hint")
        follow = Live([*invoke, "demo.logs", "--follow", *where], env=env, timeout_s=600)
        code = run.wait(600)
        assert follow.wait(60) == 0, follow.output
    finally:
        run.kill()
        if follow is not None:
            follow.kill()
    out = run.output
    assert code == 0, out[-4000:]
    assert "demo.up: verdict: decided (architect verdict)" in out
    print(next(ln for ln in out.splitlines() if "demo.up: timings:" in ln))
    for role in ("pm", "dev", "architect"):
        assert f"teardown: removed process:sbx/supervisor/band-demo-{role}/" in out
        assert re.search(rf"^{role} +\| .*demo agent ready", follow.output, re.M), follow.output
    assert follow.output.splitlines()[-1] == "demo.logs: the run ended (its manifest is gone)"
    assert CANARY not in follow.output
    calls = [json.loads(line)["argv"] for line in (sim.state / "calls.jsonl").open()]
    kits = sorted(Path(argv[-2]).name for argv in calls if argv[:1] == ["create"])
    assert kits == ["band-demo-architect", "band-demo-dev", "band-demo-pm"]  # staged copies
    assert sum(argv[:2] == ["run", "--name"] for argv in calls) >= 3  # one attach each
    assert json.loads(sim("ls", "--json").stdout)["sandboxes"] == []
    assert supervisors() == []
    layout = DemoLayout.for_run_dir(run_dir)
    assert not layout.manifest.exists()
    assert not list((layout.runtimes / "sbx" / "supervisors").glob("*"))
    wait_for(lambda: not watchers(sim.state), 5, "the idle watchers to exit")
    assert CANARY not in out
    assert CANARY not in sim.outputs()
