"""The README's fleet walkthrough as written, in a fresh clone, on the docker runtime:
`fleet.up` makes three connected agents, `fleet.status` shows them, a second `fleet.up`
has nothing to do, `fleet.rollout` replaces every sandbox in batches while a marker sent
to each agent during its replacement is answered afterwards, a rollout onto an image
that is not a kit image puts its batch back and exits 1, and `fleet.down` leaves nothing:
no platform agent, container, network, stored key, record, workspace copy or process."""

from __future__ import annotations

import secrets
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from bandkit.emulator import service
from bandkit.image import bases
from bandkit.image.facts import host_arch
from bandkit.kit.agent_check import home_title
from bandkit.manifest import Kind, Manifest
from tests.demo.leftovers import process_leftovers
from tests.support import images
from tests.support.readme import clean_env, platform_listing, readme_block, run
from tests.support.wait import wait_for

pytestmark = pytest.mark.docker
AGENTS = ("echo-1", "echo-2", "echo-3")
NO_OP_S = 10.0  # the bench holds the 5 s; here: clearly not a converge pass


def _containers() -> dict[str, str]:
    out = subprocess.run(
        ["docker", "ps", "--all", "--format", "{{.Names}} {{.ID}}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    pairs = (line.split() for line in out.splitlines())
    return {name: ident for name, ident in pairs if name in AGENTS}


def _networks() -> list[str]:
    out = subprocess.run(
        ["docker", "network", "ls", "--format", "{{.Name}}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    return [n for n in out.split() if any(n.startswith(f"bandkit-{a}-") for a in AGENTS)]


class Platform:
    """The clone's local platform, as a user of its human API."""

    def __init__(self, clone: Path) -> None:
        record = service.running(clone / ".run")
        assert record is not None
        self.url, self.key = record.rest_url, service.read_user_key(record)
        self.run_dir = clone / ".run"

    def _ids(self, name: str) -> tuple[str, str]:
        path = self.run_dir / "provision" / name / "manifest.json"
        resources = Manifest.read(path)
        room = next(
            r.details["id"]
            for r in resources
            if r.kind is Kind.ROOM and r.details.get("title") == home_title(name)
        )
        agent = next(r.details["id"] for r in resources if r.kind is Kind.AGENT)
        return room, agent

    def mention(self, name: str, text: str) -> None:
        room, agent = self._ids(name)
        message = {"content": f"@{name} {text}", "mentions": [{"id": agent, "name": name}]}
        sent = httpx.post(
            f"{self.url}/api/v1/me/chats/{room}/messages",
            headers={"x-api-key": self.key},
            json={"message": message},
            timeout=10,
        )
        sent.raise_for_status()

    def answered(self, name: str, text: str) -> bool:
        room, agent = self._ids(name)
        listed = httpx.get(
            f"{self.url}/api/v1/me/chats/{room}/messages",
            headers={"x-api-key": self.key},
            timeout=10,
        )
        listed.raise_for_status()
        return any(
            m.get("sender_id") == agent and text in str(m.get("content"))
            for m in listed.json()["data"]
        )


def _rollout_with_markers(clone: Path, line: str, platform: Platform) -> dict[str, str]:
    """Run the rollout; as each agent's old sandbox is removed, mention it with a marker."""
    markers: dict[str, str] = {}
    proc = subprocess.Popen(
        ["bash", "-c", line],
        cwd=clone,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    assert proc.stdout is not None
    seen: list[str] = []

    def watch() -> None:
        assert proc.stderr is not None
        for text in proc.stderr:
            seen.append(text)
            for name in AGENTS:
                if text.startswith(f"fleet: {name}: old sandbox removed"):
                    markers[name] = f"marker:{secrets.token_hex(4)}"
                    platform.mention(name, markers[name])

    watcher = threading.Thread(target=watch)
    watcher.start()
    stdout = proc.stdout.read()
    assert proc.wait(timeout=300) == 0, stdout + "".join(seen)
    watcher.join(timeout=30)
    assert "fleet.rollout: batch 1/2: echo-1, echo-2 -> band-python-kit:local" in stdout
    assert "fleet.rollout: 3 agent(s) on band-python-kit:local" in stdout, stdout
    assert sorted(markers) == list(AGENTS), "".join(seen)
    return markers


def test_the_readme_fleet_walkthrough_as_written(clone: Path) -> None:
    block = readme_block("Fleets: many agents from one file")
    assert block == [
        "uv run invoke platform.up",
        "uv run invoke fleet.up --file examples/fleet/fleet.yaml --runtime docker",
        "uv run invoke fleet.status",
        "uv run invoke fleet.up --file examples/fleet/fleet.yaml --runtime docker",
        "uv run invoke fleet.rollout --image band-python-kit:local --parallel 2",
        "uv run invoke fleet.down",
    ]
    platform_up, up, status, again, rollout, down = block
    run("uv run invoke build", clone)
    run(platform_up, clone)
    try:
        made = run(up, clone)
        assert "+ echo-1: create (new)" in made.stdout
        assert "fleet.up: 3 of 3 change(s) made" in made.stdout, made.stdout
        rows = run(status, clone).stdout.splitlines()
        assert rows[0].split()[:4] == ["NAME", "RUNTIME", "NODE", "STATE"]
        for name, row in zip(AGENTS, rows[1:], strict=True):
            assert row.split()[:7] == [name, "docker", "this", "host", "running", "yes", "now"]
        began = time.monotonic()
        noop = run(again, clone)
        assert "fleet.up: nothing to do: 3 agent(s) as the file says" in noop.stdout
        assert time.monotonic() - began <= NO_OP_S

        before = _containers()
        platform = Platform(clone)
        markers = _rollout_with_markers(clone, rollout, platform)
        after = _containers()
        assert sorted(after) == list(AGENTS)
        assert all(after[n] != before[n] for n in AGENTS), (before, after)  # each replaced
        for name, marker in markers.items():
            wait_for(
                lambda n=name, m=marker: platform.answered(n, m),  # type: ignore[misc]
                timeout=60,
                what=f"{name} to answer {marker}",
            )

        broken = subprocess.run(
            [
                "bash",
                "-c",
                f"uv run invoke fleet.rollout --image {bases.python_tag(host_arch())}",
            ],
            cwd=clone,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert broken.returncode == 1, broken.stdout + broken.stderr
        assert "batch 1 failed, put back on the image it ran" in broken.stderr
        assert "Traceback" not in broken.stderr
        back = run(status, clone).stdout.splitlines()[1:]
        assert [r.split()[5] for r in back] == ["yes", "yes", "yes"], back
        assert "echo: @echo-1 ping:" in run("uv run invoke kit.ping --name echo-1", clone).stdout
    finally:
        gone = subprocess.run(
            ["bash", "-c", down],
            cwd=clone,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        images.remove_agent_images(clone)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert "fleet.down: 3 agent(s) removed" in gone.stdout
    _nothing_left(clone)


def _nothing_left(clone: Path) -> None:
    run_dir = clone / ".run"
    assert platform_listing(clone, "/api/v1/me/agents") == []
    assert _containers() == {}
    assert _networks() == []
    assert not (run_dir / "fleet").exists()
    assert list((run_dir / "provision").glob("*")) == []
    assert list(run_dir.glob("runtimes/*/keychain/*")) == []
    record = service.running(run_dir)
    keep = (record.pid,) if record is not None else ()
    assert process_leftovers((run_dir,), keep_pids=keep) == []
