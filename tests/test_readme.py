"""The README's walkthrough, run exactly as written in a fresh clone.

Each command of "Quick start" (but `uv run nox`, which is this suite) and "Your first
agent" runs through bash with the clone's root as cwd, default options and relative paths,
and each documented outcome is checked: the agent id printed, the ping answered, and
after `kit.unprovision` nothing left (no agent or room on the platform, no box, no
process, band.yaml back to its placeholder). The docker variant of the same walkthrough
is in tests/docker/test_readme_docker.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bandkit.runtimes.local import LocalRuntime
from tests.runtimes.helpers import scratch_dir

REPO = Path(__file__).resolve().parents[1]
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
SKIPPED = ("uv run nox",)  # the suite itself


def readme_block(heading: str) -> list[str]:
    """The commands of the first ```sh block under `## heading`, one per line."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def clean_env() -> dict[str, str]:
    """The environment of a newcomer's shell: no platform settings, no nox/uv venv."""
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("BAND_", "NOX_", "SBX_")) or name in (
            "VIRTUAL_ENV",
            "UV_PROJECT_ENVIRONMENT",
            "PYTHONPATH",
        ):
            del env[name]
    return env


@pytest.fixture
def clone() -> Iterator[Path]:
    # Where a newcomer keeps a checkout the agent uid can traverse (pytest's own tmp is
    # 0700; the local runtime refuses such a run directory with a clear error).
    parent = scratch_dir("readme-")
    target = parent / "kit"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(target)], check=True, timeout=120)
    yield target
    for cleanup in (
        "uv run invoke kit.unprovision --name my-agent",
        "uv run invoke platform.down",
    ):
        if (target / ".run" / "platform.json").exists():
            subprocess.run(
                ["bash", "-c", cleanup],
                cwd=target,
                env=clean_env(),
                capture_output=True,
                timeout=120,
                check=False,
            )
    shutil.rmtree(parent, ignore_errors=True)


def run(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["bash", "-c", line],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"`{line}` failed:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def platform_listing(clone: Path, path: str) -> list[dict[str, object]]:
    record = json.loads((clone / ".run" / "platform.json").read_text())
    key = Path(record["user_key_file"]).read_text().strip()
    response = httpx.get(f"{record['rest_url']}{path}", headers={"X-API-Key": key}, timeout=10)
    response.raise_for_status()
    data: list[dict[str, object]] = response.json()["data"]
    return data


@pytest.mark.slow
def test_quick_start_and_first_agent_as_written(clone: Path) -> None:
    quick = [line for line in readme_block("Quick start") if not line.startswith(SKIPPED)]
    assert quick, "the quick start lost its commands"
    for line in quick:
        run(line, clone)

    steps = readme_block("Your first agent")
    assert [s.split()[3] if s.startswith("uv run") else s.split()[0] for s in steps] == [
        "platform.up",
        "cp",
        "kit.provision",
        "kit.ping",
        "kit.unprovision",
        "platform.down",
    ], "the walkthrough changed: update this test with it"
    up, copy, provision, ping, unprovision, down = steps

    assert "BAND_REST_URL=http://127.0.0.1:" in run(up, clone).stdout
    run(copy, clone)
    agent_id = run(provision, clone).stdout.strip()
    assert UUID.match(agent_id), agent_id  # stdout is the agent id only
    assert "agent.id" not in agent_id
    assert agent_id in (clone / "my-agent" / "band.yaml").read_text()

    pong = run(ping, clone).stdout
    assert "echo: @my-agent ping:" in pong
    assert "kit.ping: answered in " in pong

    removed = run(unprovision, clone).stdout
    assert "removed agent:" in removed
    assert platform_listing(clone, "/api/v1/me/agents") == []
    assert platform_listing(clone, "/api/v1/me/chats") == []
    box = LocalRuntime(clone / ".run" / "runtimes" / "local").boxes_root() / "my-agent"
    assert not box.exists()
    assert not (clone / ".run" / "provision" / "my-agent").exists()
    assert "replace-with-agent-id" in (clone / "my-agent" / "band.yaml").read_text()
    leftover = subprocess.run(["pgrep", "-f", str(box)], capture_output=True, check=False)
    assert leftover.returncode == 1, f"processes left: {leftover.stdout!r}"

    assert "platform.down: " in run(down, clone).stdout
