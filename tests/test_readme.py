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
import signal
import subprocess
from pathlib import Path

import pytest

from bandkit import daemons
from bandkit.emulator import service
from bandkit.runtimes.local import LocalRuntime
from tests.support.readme import UUID, platform_listing, readme_block, run
from tests.support.wait import wait_for

pytestmark = pytest.mark.e2e

SKIPPED = ("uv run nox",)  # the suite itself


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

    # "After a crash or a reboot": all up; the platform killed; kit.resume --all brings
    # it back on its address and waits for the agent; the boot unit names this clone.
    status, resume, boot_unit = readme_block("After a crash or a reboot")
    assert [s.split()[3] for s in (status, resume, boot_unit)] == [
        "kit.status",
        "kit.resume",
        "kit.boot-unit",
    ], "the restart section changed: update this test with it"
    assert "my-agent" in run(status, clone).stdout
    record = json.loads((clone / ".run" / "platform.json").read_text())
    os.kill(record["pid"], signal.SIGKILL)
    wait_for(lambda: not daemons.runs_module(record["pid"], service.MODULE), 10, "the kill")
    run(resume, clone)
    assert (
        json.loads((clone / ".run" / "platform.json").read_text())["rest_url"]
        == (record["rest_url"])
    )
    assert "echo: @my-agent ping:" in run(ping, clone).stdout
    assert f"cp {clone}/band-kit-resume.service " in run(boot_unit, clone).stdout
    unit = (clone / "band-kit-resume.service").read_text()
    assert f"WorkingDirectory={clone}\n" in unit
    assert f"kit.resume --all --run-dir {clone}/.run\n" in unit

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
