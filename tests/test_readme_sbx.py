"""The README's first agent for a user with sbx 0.47 (simulated, 3 s idle auto-stop): the
"Your first agent" commands as written, with the README's sbx substitution for
`--runtime local`, in a fresh clone. The agent answers the ping after an idle period longer
than the auto-stop (its supervisor keeps it attached, outliving `kit.provision`), and
`kit.unprovision` leaves no sandbox, secret, session or supervisor."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from bandkit.runtimes import processes
from tests import commands
from tests.fakes.simharness import Sim, simulator, watchers
from tests.runtimes.helpers import wait_for
from tests.test_readme import UUID, clean_env, clone, platform_listing, readme_block

__all__ = ["clone"]  # the fresh-clone fixture

SBX_FLAGS = "--runtime sbx --kit docker/band_python_kit"
SETUP = "sbx policy init balanced"
IDLE_S = 3.0


def run(line: str, cwd: Path, sim: Sim) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    env |= {k: v for k, v in sim.env.items() if k == "PATH" or k.startswith("SBX_SIM_")}
    proc = commands.run(["bash", "-c", line], cwd=cwd, env=env)
    assert proc.returncode == 0, f"`{line}` failed:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def supervisors(name: str) -> list[int]:
    return processes.tagged_pids(f"sbx/supervisor/{name}/", prefix=True)


@pytest.mark.slow
def test_first_agent_with_sbx_047(clone: Path) -> None:
    readme = (clone / "README.md").read_text(encoding="utf-8")
    assert f"`{SETUP}` once" in readme
    assert f"use `{SBX_FLAGS}` instead of `--runtime local`" in readme
    up, copy, provision, ping, unprovision, down = readme_block("Your first agent")
    assert "--runtime local" in provision
    provision = provision.replace("--runtime local", SBX_FLAGS)

    with simulator("0.47.0", idle_s=IDLE_S) as sim:
        run(SETUP, clone, sim)
        run(up, clone, sim)
        try:
            run(copy, clone, sim)
            agent_id = run(provision, clone, sim).stdout.strip()
            assert UUID.match(agent_id), agent_id
            (row,) = json.loads(sim("ls", "--json").stdout)["sandboxes"]
            assert row["name"] == "my-agent"
            assert supervisors("my-agent")  # outlived the provision task
            time.sleep(IDLE_S * 2)  # the property: an idle period longer than the auto-stop
            pong = run(ping, clone, sim).stdout
            assert "echo: @my-agent ping:" in pong

            assert "removed agent:" in run(unprovision, clone, sim).stdout
            assert json.loads(sim("ls", "--json").stdout)["sandboxes"] == []
            assert "my-agent" not in sim("secret", "ls", "--json").stdout
            assert supervisors("my-agent") == []
            assert platform_listing(clone, "/api/v1/me/agents") == []
            assert "replace-with-agent-id" in (clone / "my-agent" / "band.yaml").read_text()
            assert not (clone / ".run" / "runtimes" / "sbx" / "supervisors" / "my-agent").exists()
            wait_for(lambda: not watchers(sim.state), 5, "the idle watchers to exit")
        finally:
            run(down, clone, sim)
