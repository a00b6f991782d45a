"""The README's fleet walkthrough with sbx (simulated 0.47, 3 s idle auto-stop), as the
README says to run it there: `sbx policy init balanced` once, then the block with
`--runtime sbx` for `--runtime docker`, in a fresh clone. Each agent is a sandbox of the
kit with the fleet's image as its template (loaded into sbx once, from a stand-in docker
serving a small genuine archive); the agents answer a ping after an idle period longer
than the auto-stop; the rollout replaces every sandbox (each agent keeps its key: a marker
sent during its replacement is answered); `fleet.down` leaves no sandbox,
template, secret, supervisor, platform agent or record."""

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
from tests.support.fleet import Platform, rollout_with_markers
from tests.support.readme import clean_env, platform_listing, readme_block
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e
AGENTS = ("echo-1", "echo-2", "echo-3")
IDLE_S = 3.0


def _env(sim: Sim, docker: FakeDocker) -> dict[str, str]:
    env = clean_env()
    env |= {k: v for k, v in sim.env.items() if k == "PATH" or k.startswith("SBX_SIM_")}
    env[DIR_ENV] = str(docker.root)  # the simulator's PATH has the stand-in docker first
    return env


def _run(line: str, cwd: Path, sim: Sim, docker: FakeDocker) -> subprocess.CompletedProcess[str]:
    proc = commands.run(["bash", "-c", line], cwd=cwd, env=_env(sim, docker))
    assert proc.returncode == 0, f"`{line}` failed:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def test_the_readme_fleet_walkthrough_on_sbx(clone: Path) -> None:
    readme = " ".join((clone / "README.md").read_text(encoding="utf-8").split())
    assert "with sbx, run `sbx policy init balanced` once and give `--runtime sbx`" in readme
    block = [
        line.replace("--runtime docker", "--runtime sbx")
        for line in readme_block("Fleets: many agents from one file")
    ]
    up, fleet_up, status, again, rollout, down = block
    docker = FakeDocker(clone.parent / "fake-docker")
    image_id = docker.add("band-python-kit:local")
    with simulator("0.47.0", idle_s=IDLE_S, require_templates=True) as sim:
        _run("sbx policy init balanced", clone, sim, docker)
        _run(up, clone, sim, docker)
        try:
            made = _run(fleet_up, clone, sim, docker)
            assert made.stdout.count("d, connected") == len(AGENTS), made.stdout
            assert docker.saves() == 1  # one template for the fleet, loaded once
            rows = json.loads(_run(f"{status} --json", clone, sim, docker).stdout)
            assert [(r["name"], r["runtime"], r["connected"]) for r in rows] == [
                (name, "sbx", "yes") for name in AGENTS
            ]
            assert {r["image"] for r in rows} == {image_id.removeprefix("sha256:")[:12]}
            listed = json.loads(sim("ls", "--json").stdout)["sandboxes"]
            assert sorted(r["name"] for r in listed) == list(AGENTS)

            time.sleep(IDLE_S * 2)  # longer than the auto-stop: each supervisor holds on
            for name in AGENTS:
                pong = _run(f"uv run invoke kit.ping --name {name}", clone, sim, docker).stdout
                assert f"echo: @{name} ping:" in pong
            assert "nothing to do" in _run(again, clone, sim, docker).stdout

            ids = {r["name"]: r["id"] for r in json.loads(sim("ls", "--json").stdout)["sandboxes"]}
            platform = Platform(clone)
            env = _env(sim, docker)
            markers, stdout = rollout_with_markers(clone, rollout, platform, AGENTS, env)
            assert f"{len(AGENTS)} agent(s) on band-python-kit:local" in stdout, stdout
            listed = json.loads(sim("ls", "--json").stdout)["sandboxes"]
            assert all(r["id"] != ids[r["name"]] for r in listed), (ids, listed)  # replaced
            for name, marker in markers.items():  # the same agent, its key kept
                wait_for(
                    lambda n=name, m=marker: platform.answered(n, m),  # type: ignore[misc]
                    timeout=60,
                    what=f"{name} to answer {marker}",
                )
            assert docker.saves() == 1  # the template stayed held: not loaded again

            _run(down, clone, sim, docker)
            assert json.loads(sim("ls", "--json").stdout)["sandboxes"] == []
            assert json.loads(sim("template", "ls", "--json").stdout)["images"] == []
            secrets = sim("secret", "ls", "--json").stdout
            assert not [name for name in AGENTS if name in secrets], secrets
            assert not [
                n for n in AGENTS if processes.tagged_pids(f"sbx/supervisor/{n}/", prefix=True)
            ]
            assert platform_listing(clone, "/api/v1/me/agents") == []
            assert not (clone / ".run" / "fleet").exists()
            assert not list((clone / ".run" / "runtimes" / "sbx").glob("keychain/*"))
            assert not list((clone / ".run" / "provision").glob("echo-*"))
            wait_for(lambda: not watchers(sim.state), 5, "the idle watchers to exit")
        finally:
            if (clone / ".run" / "fleet").exists():
                _run("uv run invoke fleet.down", clone, sim, docker)
            _run("uv run invoke platform.down", clone, sim, docker)
