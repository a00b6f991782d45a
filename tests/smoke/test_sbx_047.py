"""The sbx smoke (smoke/README.md, "Manual: staging on real sbx") on simulated sbx 0.47
with a 3 s idle auto-stop, each step its own `invoke` as the operator runs it: the
sandbox's supervisor outlives the provision task, keeps the agent up across the idle gaps
between steps and across `sbx daemon stop` / `start -d`, every probe passes, the report
says PASS, and the cleanup probe leaves no sandbox, session or supervisor behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit import processes
from tests import commands
from tests.fakes.simharness import Sim, simulator, watchers
from tests.runtimes.helpers import Platform, emulator
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e

IDLE_S = 3.0


@pytest.fixture
def sim() -> Iterator[Sim]:
    with simulator("0.47.0", idle_s=IDLE_S) as s:
        s("policy", "init", "balanced", check=True)
        yield s


@pytest.fixture
def staging(run_dir: Path) -> Iterator[Platform]:
    with emulator(run_dir / "staging") as platform:
        yield platform


def supervisors() -> list[int]:
    return processes.tagged_pids("sbx/supervisor/smoke-", prefix=True)


def test_the_sbx_walkthrough_on_simulated_047(
    run_dir: Path, sim: Sim, staging: Platform, agent_sdk: None
) -> None:
    env = {k: v for k, v in sim.env.items() if not k.startswith("BAND_")}
    env |= {
        "BAND_REST_URL": staging.rest_url,
        "BAND_WS_URL": staging.ws_url,
        "BAND_API_KEY_USER": staging.user_key,
    }

    def step(*args: str) -> str:
        done = commands.invoke(*args, "--run-dir", str(run_dir), env=env, timeout=300)
        out = done.stdout + done.stderr
        assert done.returncode == 0, f"{args}: {out[-3000:]}"
        assert staging.user_key not in out
        return out

    step("smoke.preflight", "--runtime", "sbx")
    step("smoke.probe", "--label", "provision", "--runtime", "sbx")
    (sandbox,) = (row["name"] for row in json.loads(sim("ls", "--json").stdout)["sandboxes"])
    assert supervisors()  # it outlived the task that started it
    step("smoke.probe", "--label", "initial")
    step("smoke.phase", "--phase", "awaiting-wifi-recovery")
    step("smoke.probe", "--label", "after-wifi-reconnect")
    step("smoke.phase", "--phase", "awaiting-sleep-wake")
    step("smoke.probe", "--label", "after-sleep-wake")
    step("smoke.phase", "--phase", "daemon-restart")
    sim("daemon", "stop", check=True)  # the VM stops; the supervisor's `sbx run` ends
    sim("daemon", "start", "-d", check=True)
    step("smoke.probe", "--label", "after-daemon-restart")  # the supervisor re-attached
    autostops = sim.state / "autostop.log"
    assert not autostops.exists() or sandbox not in autostops.read_text()
    step("smoke.probe", "--label", "cleanup")
    assert "smoke.report: PASS" in step("smoke.report")
    assert json.loads(sim("ls", "--json").stdout)["sandboxes"] == []
    assert supervisors() == []
    wait_for(lambda: not watchers(sim.state), 5, "the idle watchers to exit")
    assert not list(run_dir.rglob("supervisor.json"))
