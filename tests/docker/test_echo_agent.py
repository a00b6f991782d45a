"""The echo-agent starter in the kit image: real entrypoint, real launcher, real emulator.

The container shares the host network (`--network host`) so it reaches the emulator on
127.0.0.1. The workspace is the starter with its `credentials:` block removed (the
environment tier): there is no sandbox proxy here to swap the `proxy-managed` sentinel
for the real key, so the agent's key is passed in the environment, never in argv.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from bandkit.emulator.server import Emulator, EmulatorConfig
from bandkit.image.facts import STARTER_DIR
from launcher.constants import INSECURE_ENDPOINTS_ENV, PROXY_MANAGED
from tests.emulator.support import (
    USER_KEY,
    Observer,
    add,
    create_room,
    human_client,
    mention,
    register,
)
from tests.support.wait import until

from .conftest import run

pytestmark = pytest.mark.docker
HOST_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
LAUNCH = ("/opt/band/venv/bin/python", "-m", "launcher")


@pytest.fixture
def workspace() -> Iterator[Path]:
    """A world-readable copy of the starter (uid 1000 in the container reads it)."""
    folder = Path(tempfile.mkdtemp(prefix="bandkit-echo-ws-"))
    folder.chmod(0o755)
    for name in ("main.py", "pyproject.toml", "uv.lock"):
        shutil.copy2(STARTER_DIR / name, folder / name)
    band_yaml = (STARTER_DIR / "band.yaml").read_text()
    without_custody = re.sub(r"^credentials:\n(?:  .*\n)+", "", band_yaml, flags=re.MULTILINE)
    assert without_custody != band_yaml
    (folder / "band.yaml").write_text(without_custody)
    for path in folder.iterdir():
        path.chmod(0o644)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def test_starter_passes_the_launcher_check_through_the_entrypoint(kit_image: str) -> None:
    proc = run(
        kit_image,
        *LAUNCH,
        "--check",
        env={
            "WORKSPACE_DIR": "/workspace",
            "BAND_AGENT_ID": "agent-123",
            "BAND_API_KEY": PROXY_MANAGED,
        },
        docker_args=["--volume", f"{STARTER_DIR}:/workspace:ro"],
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("launcher check: every phase up to sync passed")
    assert "phase identity: uid 1000" in proc.stderr
    assert "exec         /home/agent/.local/share/band-kit/venv/bin/python" in proc.stdout


def _logs(name: str) -> str:
    proc = subprocess.run(
        ["docker", "logs", name], capture_output=True, text=True, check=False, timeout=60
    )
    return proc.stdout + proc.stderr


def _online(emulator: Emulator, agent_id: str) -> Callable[[], bool]:
    """The agent's socket joined its rooms topic (as the emulator's own e2e test checks)."""

    def check() -> bool:
        assert emulator.platform is not None
        sock = emulator.platform.broker.agent_sockets.get(agent_id)
        return sock is not None and f"agent_rooms:{agent_id}" in sock.topics

    return check


@pytest_asyncio.fixture
async def emulator() -> AsyncIterator[Emulator]:
    emu = Emulator(EmulatorConfig(host="127.0.0.1"), user_key=USER_KEY)
    await emu.startup()
    try:
        yield emu
    finally:
        await emu.shutdown(2.0)


async def test_containerised_echo_agent_answers_a_mention(
    kit_image: str, emulator: Emulator, workspace: Path
) -> None:
    human = human_client(emulator.rest_url)
    agent = await register(human)
    room = await create_room(human, "docker echo")
    await add(human, room, agent.id)
    name = f"bandkit-echo-{uuid.uuid4().hex[:8]}"
    env = {
        "WORKSPACE_DIR": "/workspace",
        "BAND_AGENT_ID": agent.id,
        "BAND_API_KEY": agent.key,
        "BAND_REST_URL": emulator.rest_url,
        "BAND_WS_URL": emulator.ws_url,
        INSECURE_ENDPOINTS_ENV: "1",
        # uv syncs the starter's lock from PyPI: trust what the host trusts.
        "SSL_CERT_FILE": "/tmp/host-ca.crt",
    }
    argv = ["docker", "run", "-d", "--name", name, "--network", "host"]
    argv += ["--volume", f"{workspace}:/workspace:ro"]
    argv += ["--volume", f"{HOST_BUNDLE}:/tmp/host-ca.crt:ro"]
    for key in env:
        argv += ["--env", key]
    subprocess.run(
        [*argv, kit_image, *LAUNCH],
        env={**os.environ, **env},
        capture_output=True,
        check=True,
        timeout=60,
    )
    try:
        try:
            await until(_online(emulator, agent.id), timeout=180, what="agent online")
            async with Observer(emulator.ws_url) as obs:
                await obs.watch(room)
                await mention(human, room, agent, "hello from docker")
                reply = await obs.wait_reply("hello from docker", timeout=60)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; container log:\n{_logs(name)[-3000:]}") from None
        assert reply.payload.sender_id == agent.id
        output = _logs(name)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False, timeout=60)
    assert "phase identity: uid 1000" in output
    assert agent.key not in output
    assert USER_KEY not in output
    assert "Traceback" not in output
