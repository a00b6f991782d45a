"""`invoke kit.provision` end to end, as a user runs it: the agent answers on the emulator,
stdout is the agent id only, a re-run is idempotent, `kit.unprovision` leaves nothing, and
neither the user key nor the minted agent key appears in any output, log, manifest or
simulator state file."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import commands
from tests.fakes.simharness import simulator
from tests.runtimes.helpers import Platform, echo_workspace, emulator, make_kit

pytestmark = pytest.mark.e2e

USER_KEY = "canary-user-key-0c9d2e7f41aa"


@pytest.fixture(scope="module")
def canary_platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with emulator(Path(tmp_path_factory.mktemp("emu")), user_key=USER_KEY) as p:
        yield p


def invoke(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return commands.invoke(*args, env=env)


def files_text(root: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace")
        for p in root.rglob("*")
        if p.is_file() and "keychain" not in p.parts and p.name != "keychain.json"
    )


@pytest.mark.parametrize("runtime", ["local", "sbx-0.47"])
def test_provision_task_end_to_end(
    runtime: str, canary_platform: Platform, scratch: Path, agent_sdk: None
) -> None:
    platform = canary_platform
    name = f"e2e-{runtime.replace('.', '')}"
    ws = echo_workspace(scratch, agent_id=None, rest_url=platform.rest_url, ws_url=platform.ws_url)
    run_dir = scratch / "run"
    with simulator("0.47.0") as sim:
        sim("policy", "init", "balanced", check=True)
        env = {**sim.env, "BAND_API_KEY_USER": USER_KEY}
        env.pop("BAND_REST_URL", None)
        kind = runtime.split("-")[0]
        args = [
            "kit.provision",
            "--name",
            name,
            "--workspace",
            str(ws),
            "--description",
            "an echo agent provisioned end to end",
            "--rest-url",
            platform.rest_url,
            "--runtime",
            kind,
            "--run-dir",
            str(run_dir),
        ]
        if kind == "sbx":
            args += ["--kit", str(make_kit(scratch))]
        first = invoke(*args, env=env)
        assert first.returncode == 0, first.stderr
        agent_id = first.stdout.strip()
        assert first.stdout == agent_id + "\n"  # stdout is the agent id only
        assert f"agent {agent_id} connected in" in first.stderr  # proven, not assumed
        assert [a["id"] for a in platform.agents() if a["name"] == name] == [agent_id]

        room = platform.room_with(agent_id)
        assert platform.round_trip(room, agent_id, timeout=120).startswith("echo: ")
        common = ["--name", name, "--rest-url", platform.rest_url, "--run-dir", str(run_dir)]
        pinged = invoke("kit.ping", *common, env=env)
        assert pinged.returncode == 0, pinged.stderr
        reply, timing = pinged.stdout.splitlines()
        assert reply.startswith("echo: ")
        assert "ping:" in reply
        assert timing.startswith("kit.ping: answered in ")

        # Logs, manifests and state while everything runs (teardown deletes some of it).
        while_running = files_text(run_dir) + sim.outputs()
        assert "phase exec" in while_running  # the launcher's log is among the files read

        again = invoke(*args, env=env)
        assert again.returncode == 0, again.stderr
        assert again.stdout == first.stdout
        assert "skip" in again.stderr
        assert [a["name"] for a in platform.agents()].count(name) == 1

        # The minted key lives only in the host-side store; find it there to hunt for it.
        if kind == "sbx":
            agent_keys = list(json.loads((sim.state / "keychain.json").read_text()).values())
        else:
            chain = run_dir / "runtimes" / "local" / "keychain" / f"{name}.json"
            agent_keys = [e["value"] for e in json.loads(chain.read_text())]
        assert len(agent_keys) == 1
        assert agent_keys[0].startswith("band_a_")

        down = invoke(
            "kit.unprovision",
            "--name",
            name,
            "--rest-url",
            platform.rest_url,
            "--run-dir",
            str(run_dir),
            env=env,
        )
        assert down.returncode == 0, down.stderr
        assert "removed agent:" in down.stdout
        assert name not in [a["name"] for a in platform.agents()]
        if kind == "sbx":
            assert json.loads(sim("ls", "--json").stdout) == {"sandboxes": []}
            assert (
                json.loads(sim("secret", "ls", "--sandbox", name, "--json").stdout)[
                    "custom_secrets"
                ]
                == []
            )
            assert json.loads(sim("policy", "ls", "--json").stdout)["rules"] == []
        assert not (run_dir / "provision" / name / "manifest.json").exists()
        assert not list((run_dir / "runtimes").glob(f"*/sandboxes/{name}"))
        assert not list((run_dir / "runtimes").glob(f"*/boxes/{name}"))

        texts = [
            pinged.stdout,
            pinged.stderr,
            first.stdout,
            first.stderr,
            again.stdout,
            again.stderr,
            down.stdout,
            down.stderr,
            files_text(run_dir),
            files_text(ws),
            sim.outputs(),
            platform.log.read_text(),
        ]
        for secret in (USER_KEY, *agent_keys):
            assert all(secret not in text for text in texts)
    assert os.path.exists(ws / "band.yaml")


def test_provision_fails_with_the_logs_when_the_agent_never_connects(
    canary_platform: Platform, scratch: Path, agent_sdk: None
) -> None:
    platform = canary_platform
    ws = echo_workspace(scratch, agent_id=None, rest_url=platform.rest_url, ws_url=platform.ws_url)
    # its last words retitle the window (OSC ... BEL) and clear the screen (CSI 2J)
    (ws / "main.py").write_text(
        "import sys\nprint('\\x1b]0;pwned\\x07\\x1b[2Jagent exploded on start')\nsys.exit(3)\n"
    )
    run_dir = scratch / "run"
    env = {**os.environ, "BAND_API_KEY_USER": USER_KEY}
    env.pop("BAND_REST_URL", None)
    common = ["--name", "never-up", "--rest-url", platform.rest_url, "--run-dir", str(run_dir)]
    proc = invoke(
        "kit.provision",
        *common,
        "--workspace",
        str(ws),
        "--description",
        "an agent that dies at start",
        "--runtime",
        "local",
        "--wait",
        "20",
        env=env,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""  # no agent id printed as if it had worked
    assert "kit.provision: " in proc.stderr
    assert "Traceback" not in proc.stderr
    assert "did not connect" in proc.stderr or "stopped before" in proc.stderr
    assert "agent exploded on start" in proc.stderr  # the tail of the startup log
    assert "pwned" in proc.stderr  # shown, as text
    assert "\x1b" not in proc.stderr  # never as an escape sequence for the terminal
    assert "\x07" not in proc.stderr
    assert "kit.unprovision --name never-up" in proc.stderr
    assert USER_KEY not in proc.stderr
    down = invoke("kit.unprovision", *common, env=env)
    assert down.returncode == 0, down.stderr
    assert "never-up" not in [a["name"] for a in platform.agents()]
