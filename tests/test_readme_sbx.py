"""The README's first agent for a user with sbx 0.47 (simulated, 3 s idle auto-stop): the
"Your first agent" commands as written, with the README's sbx substitution for
`--runtime local`, in a fresh clone. The kit's local image (here from a stand-in docker
serving a small genuine archive; the simulator refuses an image it does not hold) is
loaded into sbx by `kit.provision`, once. The agent answers the ping after an idle period
longer than the auto-stop (its supervisor keeps it attached, outliving `kit.provision`),
and `kit.unprovision` leaves no sandbox, secret, session, supervisor or template."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from bandkit import processes
from tests import commands
from tests.fakes.docker_archive import DIR_ENV, FakeDocker
from tests.fakes.simharness import Sim, simulator, watchers
from tests.support.readme import UUID, clean_env, platform_listing, readme_block
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e


SBX_FLAGS = "--runtime sbx --kit docker/band_python_kit"
SETUP = "sbx policy init balanced"
IDLE_S = 3.0


def run(
    line: str, cwd: Path, sim: Sim, docker: FakeDocker | None = None
) -> subprocess.CompletedProcess[str]:
    env = clean_env()
    env |= {k: v for k, v in sim.env.items() if k == "PATH" or k.startswith("SBX_SIM_")}
    if docker is not None:
        env[DIR_ENV] = str(docker.root)  # the simulator's PATH has the stand-in docker
    proc = commands.run(["bash", "-c", line], cwd=cwd, env=env)
    assert proc.returncode == 0, f"`{line}` failed:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def supervisors(name: str) -> list[int]:
    return processes.tagged_pids(f"sbx/supervisor/{name}/", prefix=True)


def test_first_agent_with_sbx_047(clone: Path) -> None:
    readme = (clone / "README.md").read_text(encoding="utf-8")
    assert f"`{SETUP}` once" in readme
    assert f"use `{SBX_FLAGS}` instead of `--runtime local`" in readme
    up, copy, provision, ping, unprovision, down = readme_block("Your first agent")
    assert "--runtime local" in provision
    provision = provision.replace("--runtime local", SBX_FLAGS)

    docker = FakeDocker(clone.parent / "fake-docker")
    image_id = docker.add("band-python-kit:local")  # as `uv run invoke image.build` makes it
    with simulator("0.47.0", idle_s=IDLE_S, require_templates=True) as sim:
        run(SETUP, clone, sim)
        run(up, clone, sim)
        try:
            run(copy, clone, sim)
            provisioned = run(provision, clone, sim, docker)
            agent_id = provisioned.stdout.strip()
            assert UUID.match(agent_id), agent_id
            assert f"loading band-python-kit:local ({image_id[:19]}" in provisioned.stderr
            assert docker.saves() == 1
            (held,) = json.loads(sim("template", "ls", "--json").stdout)["images"]
            assert (held["repository"], held["tag"]) == (
                "docker.io/library/band-python-kit",
                "local",
            )
            (row,) = json.loads(sim("ls", "--json").stdout)["sandboxes"]
            assert row["name"] == "my-agent"
            assert supervisors("my-agent")  # outlived the provision task
            time.sleep(IDLE_S * 2)  # the property: an idle period longer than the auto-stop
            pong = run(ping, clone, sim).stdout
            assert "echo: @my-agent ping:" in pong

            assert "removed agent:" in run(unprovision, clone, sim, docker).stdout
            assert json.loads(sim("ls", "--json").stdout)["sandboxes"] == []
            assert json.loads(sim("template", "ls", "--json").stdout)["images"] == []
            assert "my-agent" not in sim("secret", "ls", "--json").stdout
            assert supervisors("my-agent") == []
            assert platform_listing(clone, "/api/v1/me/agents") == []
            assert "replace-with-agent-id" in (clone / "my-agent" / "band.yaml").read_text()
            assert not (clone / ".run" / "runtimes" / "sbx" / "supervisors" / "my-agent").exists()
            wait_for(lambda: not watchers(sim.state), 5, "the idle watchers to exit")
        finally:
            run(down, clone, sim)
