"""kill -9 of a real provisioning process between each step, then the re-run: it never
mints a second agent silently, says what to do, and `unprovision` leaves nothing behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bandkit.kit import commands as provision_run
from bandkit.kit.band_yaml import read_agent_id
from bandkit.kit.provision import ProvisionError, ProvisionRequest
from launcher.constants import PLACEHOLDER_AGENT_ID
from tests.fakes.simharness import Sim
from tests.kit.conftest import sim_context
from tests.runtimes.helpers import Platform, echo_workspace, make_kit

DESCRIPTION = "an echo agent provisioned by the tests"

# Runs provision_run.run in a child that SIGKILLs itself where STEP says.
DRIVER = textwrap.dedent(
    """
    import json, os, signal, sys
    from pathlib import Path
    import bandkit.kit.provision as prov
    from bandkit.kit import commands as provision_run
    from bandkit.runtimes.sbx import SbxRuntime
    args = json.loads(sys.argv[1])

    def die(*_a, **_k):
        os.kill(os.getpid(), signal.SIGKILL)

    step = args["step"]
    if step == "before-register":
        prov.register_agent = die
    elif step == "after-register":
        prov.write_agent_id = die
    elif step == "after-write-id":
        SbxRuntime.set_secret = die
    elif step == "after-inject":
        prov._ensure_created = die
    fields = {**args["request"], "workspace": Path(args["request"]["workspace"])}
    request = prov.ProvisionRequest(**fields)
    provision_run.run(request, runtime="sbx", run_dir=Path(args["run_dir"]),
                      api_key=os.environ["TEST_USER_KEY"], log=print)
    """
)


def request(platform: Platform, ws: Path, name: str, kit: Path) -> ProvisionRequest:
    return ProvisionRequest(
        name=name,
        description=DESCRIPTION,
        workspace=ws,
        rest_url=platform.rest_url,
        create=True,
        kit=str(kit),
    )


def crash_at(step: str, req: ProvisionRequest, run_dir: Path, sim: Sim, user_key: str) -> None:
    payload = {
        "step": step,
        "run_dir": str(run_dir),
        "request": {
            "name": req.name,
            "description": req.description,
            "workspace": str(req.workspace),
            "rest_url": req.rest_url,
            "create": req.create,
            "kit": req.kit,
        },
    }
    env = {**sim.env, "TEST_USER_KEY": user_key}
    result = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(payload)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]


def names(platform: Platform) -> list[str]:
    return [a["name"] for a in platform.agents()]


@pytest.mark.e2e  # a kill drill: a real provisioning process killed at each step
@pytest.mark.parametrize(
    "step", ["before-register", "after-register", "after-write-id", "after-inject"]
)
def test_rerun_after_kill_9(
    step: str,
    platform: Platform,
    scratch: Path,
    agent_sdk: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = f"crash-{step}"
    with sim_context("0.35.0", monkeypatch) as sim:
        ws = echo_workspace(
            scratch, agent_id=None, rest_url=platform.rest_url, ws_url=platform.ws_url
        )
        kit = make_kit(scratch)
        req = request(platform, ws, name, kit)
        run_dir = scratch / "run"
        crash_at(step, req, run_dir, sim, platform.user_key)

        def rerun() -> str:
            return provision_run.run(
                req, runtime="sbx", run_dir=run_dir, api_key=platform.user_key, log=print
            ).agent_id

        if step in ("before-register", "after-register"):
            # The manifest shows a registration that never finished: refuse, name the fix.
            with pytest.raises(ProvisionError, match=f"unprovision --name {name}"):
                rerun()
            assert names(platform).count(name) == (1 if step == "after-register" else 0)
            report = provision_run.unprovision(name, run_dir=run_dir, api_key=platform.user_key)
            assert report.clean, report.lines()
            assert name not in names(platform)
        elif step == "after-write-id":
            # band.yaml has the id, the key was never stored: refuse, never mint another.
            with pytest.raises(ProvisionError, match="stopped after registering"):
                rerun()
            assert names(platform).count(name) == 1
            report = provision_run.unprovision(name, run_dir=run_dir, api_key=platform.user_key)
            assert report.clean, report.lines()
            assert read_agent_id(ws) == PLACEHOLDER_AGENT_ID  # unprovision put it back
        agent_id = rerun()
        assert read_agent_id(ws) == agent_id
        assert names(platform).count(name) == 1
        assert json.loads(sim("ls", "--json").stdout)["sandboxes"][0]["name"] == name
        assert rerun() == agent_id  # idempotent from here on
        report = provision_run.unprovision(name, run_dir=run_dir, api_key=platform.user_key)
        assert report.clean, report.lines()
        assert name not in names(platform)
        assert json.loads(sim("ls", "--json").stdout) == {}
        assert "CUSTOM SECRETS" in sim("secret", "ls").stdout
        assert name not in sim("secret", "ls").stdout
        assert not os.path.exists(provision_run.manifest_path(run_dir, name))
