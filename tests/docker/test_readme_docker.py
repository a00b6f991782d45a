"""The README's first-agent walkthrough on the docker runtime, as the README says to run
it: the same commands in a fresh clone with `--runtime docker`, after `uv run invoke
build`. Afterwards no container, network or egress proxy of the run is left."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.readme import UUID, platform_listing, readme_block, run

pytestmark = pytest.mark.docker


def _docker_names(kind: str) -> str:
    return subprocess.run(
        ["docker", kind, "ls", "--format", "{{.Name}}"]
        if kind == "network"
        else ["docker", "ps", "-a", "--format", "{{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout


def test_first_agent_on_docker_as_written(clone: Path) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "`--runtime docker` (after `uv run invoke build`)" in readme
    up, copy, provision, ping, unprovision, down = readme_block("Your first agent")
    assert "--runtime local" in provision
    run("uv run invoke build", clone)
    run(up, clone)
    run(copy, clone)
    agent_id = run(provision.replace("--runtime local", "--runtime docker"), clone).stdout.strip()
    assert UUID.match(agent_id), agent_id
    assert "my-agent" in _docker_names("container")
    assert "echo: @my-agent ping:" in run(ping, clone).stdout
    assert "removed agent:" in run(unprovision, clone).stdout
    assert platform_listing(clone, "/api/v1/me/agents") == []
    assert "my-agent" not in _docker_names("container")
    assert "bandkit-my-agent" not in _docker_names("network")
    leftover = subprocess.run(
        ["pgrep", "-f", "bandkit.proxies.egress.*my-agent"], capture_output=True, check=False
    )
    assert leftover.returncode == 1, leftover.stdout

    # "Agent images": the same agent from an image with its dependencies in it
    build_agent, provision_imaged = readme_block("Agent images: no package install at start")
    tag = run(build_agent, clone).stdout.strip().splitlines()[-1]
    assert tag.startswith("band-agent-my-agent:"), tag
    provisioned = run(provision_imaged, clone)
    assert f"provision: agent image up to date: {tag}" in provisioned.stderr
    logs = subprocess.run(
        ["docker", "logs", "my-agent"], capture_output=True, text=True, check=True, timeout=60
    )
    assert "phase sync: skipped uv" in logs.stdout + logs.stderr
    assert "echo: @my-agent ping:" in run(ping, clone).stdout
    assert "removed agent:" in run(unprovision, clone).stdout
    subprocess.run(["docker", "image", "rm", tag], capture_output=True, check=False, timeout=120)
    run(down, clone)
