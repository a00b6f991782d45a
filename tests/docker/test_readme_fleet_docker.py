"""The README's fleet walkthrough as written, in a fresh clone, on the docker runtime:
`fleet.up` makes three connected agents, `fleet.status` shows them, a second `fleet.up`
has nothing to do, `fleet.rollout` replaces every sandbox in batches while a marker sent
to each agent during its replacement is answered afterwards, a rollout onto an image
that is not a kit image puts its batch back and exits 1, and `fleet.down` leaves nothing:
no platform agent, container, network, stored key, record, workspace copy or process."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from bandkit.emulator import service
from bandkit.image import bases
from bandkit.image.facts import host_arch
from tests.demo.leftovers import process_leftovers
from tests.support import images
from tests.support.fleet import Platform, rollout_with_markers
from tests.support.readme import (
    attempt,
    platform_listing,
    readme_block,
    readme_blocks,
    run,
)
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
    run("uv run invoke build", clone)
    kubernetes = readme_blocks("Kubernetes, rendered and checked offline")
    (_prose, (carry,)), (_prose, (build_proxy,)) = kubernetes[1], kubernetes[2]
    carried = run(carry, clone).stdout.splitlines()[-1]  # the pods' agent image
    try:
        _walkthrough(clone, block, carried, build_proxy)
    finally:
        subprocess.run(["docker", "image", "rm", carried], capture_output=True, timeout=60)


def _walkthrough(clone: Path, block: list[str], carried: str, build_proxy: str) -> None:
    """The walkthrough itself, then an image-only agent run from `carried`."""
    platform_up, up, status, again, rollout, down = block
    holds = ["docker", "run", "--rm", "--network", "none", "--entrypoint", "cat", carried]
    band_yaml = subprocess.run(
        [*holds, "/workspace/band.yaml"], capture_output=True, text=True, timeout=60
    )
    assert band_yaml.returncode == 0, band_yaml.stderr
    assert "agent" in band_yaml.stdout, band_yaml.stdout
    made_proxy = run(build_proxy, clone)  # the sidecar's image, on the kit image just built
    assert made_proxy.stdout.splitlines()[-1].startswith("band-credential-proxy:")
    run(platform_up, clone)
    try:
        made = run(up, clone)
        assert "+ echo-1: create (new)" in made.stdout
        assert "fleet.up: 3 of 3 change(s) made" in made.stdout, made.stdout
        rows = run(status, clone).stdout.splitlines()
        assert rows[0].split()[:4] == ["NAME", "RUNTIME", "NODE", "STATE"]
        for name, row in zip(AGENTS, rows[1:], strict=True):
            assert row.split()[:7] == [name, "docker", "this", "host", "running", "yes", "now"]
        assert len({row.split()[-1] for row in rows[1:]}) == 1  # one agent image, one source
        began = time.monotonic()
        noop = run(again, clone)
        assert "fleet.up: nothing to do: 3 agent(s) as the file says" in noop.stdout
        assert time.monotonic() - began <= NO_OP_S

        before = _containers()
        platform = Platform(clone)
        markers, stdout = rollout_with_markers(clone, rollout, platform, AGENTS)
        assert "fleet.rollout: batch 1/2: echo-1, echo-2 -> band-python-kit:local" in stdout
        assert "fleet.rollout: 3 agent(s) on band-python-kit:local" in stdout, stdout
        after = _containers()
        assert sorted(after) == list(AGENTS)
        assert all(after[n] != before[n] for n in AGENTS), (before, after)  # each replaced
        for name, marker in markers.items():
            wait_for(
                lambda n=name, m=marker: platform.answered(n, m),  # type: ignore[misc]
                timeout=60,
                what=f"{name} to answer {marker}",
            )

        broken = attempt(
            f"uv run invoke fleet.rollout --image {bases.python_tag(host_arch())}",
            clone,
            timeout=300,
        )
        assert broken.returncode == 1, broken.stdout + broken.stderr
        assert "batch 1 failed, put back on the image it ran" in broken.stderr
        assert "Traceback" not in broken.stderr
        back = run(status, clone).stdout.splitlines()[1:]
        assert [r.split()[5] for r in back] == ["yes", "yes", "yes"], back
        assert "echo: @echo-1 ping:" in run("uv run invoke kit.ping --name echo-1", clone).stdout
    finally:
        gone = attempt(down, clone, timeout=300)
        images.remove_agent_images(clone)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert "fleet.down: 3 agent(s) removed" in gone.stdout
    _nothing_left(clone)
    _an_image_only_agent(clone, carried, status, down)


def _an_image_only_agent(clone: Path, image: str, status: str, down: str) -> None:
    """An agent the fleet file names by its carried image alone: run with the workspace
    the image holds (copied out), connected, answering; `fleet.down` leaves nothing."""
    fleet = clone / "images.yaml"
    fleet.write_text(
        "version: 1\nagents:\n  - name: echo-1\n    description: an image-only agent\n"
        f"    image: {image}\n    workspace_dir: /workspace\n"
    )
    try:
        made = run("uv run invoke fleet.up --file images.yaml --runtime docker", clone)
        assert "fleet.up: 1 of 1 change(s) made" in made.stdout, made.stdout + made.stderr
        (row,) = run(status, clone).stdout.splitlines()[1:]
        assert row.split()[:6] == ["echo-1", "docker", "this", "host", "running", "yes"], row
        assert "echo: @echo-1 ping:" in run("uv run invoke kit.ping --name echo-1", clone).stdout
        again = run("uv run invoke fleet.up --file images.yaml --runtime docker", clone)
        assert "nothing to do: 1 agent(s)" in again.stdout, again.stdout
    finally:
        gone = attempt(down, clone, timeout=300)
        fleet.unlink()
    assert gone.returncode == 0, gone.stdout + gone.stderr
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
