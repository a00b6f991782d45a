"""Fixtures: an in-process emulator per test, the human client, the echo agent workspace."""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from band.client.rest import AsyncRestClient

from bandkit.emulator.server import Emulator, EmulatorConfig
from bandkit.image.facts import STARTER_DIR
from tests.emulator.support import USER_KEY, AgentProcess, Registered, human_client

StartEmulator = Callable[..., Any]
UV_ENV_OVERRIDES = ("UV_PROJECT_ENVIRONMENT", "VIRTUAL_ENV")


@pytest_asyncio.fixture
async def start_emulator() -> AsyncIterator[StartEmulator]:
    """Factory: `await start_emulator(**EmulatorConfig fields)`; all are shut down after."""
    running: list[Emulator] = []

    async def start(**overrides: Any) -> Emulator:
        emulator = Emulator(EmulatorConfig(**overrides), user_key=USER_KEY)
        await emulator.startup()
        running.append(emulator)
        return emulator

    yield start
    for emulator in running:
        await emulator.shutdown(2.0)


@pytest_asyncio.fixture
async def emu(start_emulator: StartEmulator) -> Emulator:
    emulator: Emulator = await start_emulator()
    return emulator


@pytest_asyncio.fixture
async def human(emu: Emulator) -> AsyncIterator[AsyncRestClient]:
    yield human_client(emu.rest_url)


@pytest.fixture(scope="session")
def echo_workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the echo-agent workspace, synced from its own lock (`uv sync --locked`)."""
    uv = shutil.which("uv")
    assert uv, "uv is required to sync the echo agent's locked environment"
    workspace = tmp_path_factory.mktemp("echo-agent")
    for name in ("main.py", "pyproject.toml", "uv.lock"):
        shutil.copy2(STARTER_DIR / name, workspace / name)
    # Not the caller's venv: nox exports UV_PROJECT_ENVIRONMENT for its own session.
    env = {k: v for k, v in os.environ.items() if k not in UV_ENV_OVERRIDES}
    result = subprocess.run(
        [uv, "sync", "--locked", "--quiet", "--project", str(workspace)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, f"uv sync --locked of the echo agent failed:\n{result.stderr}"
    return workspace


@pytest_asyncio.fixture
async def echo_agents(
    echo_workspace: Path, tmp_path: Path
) -> AsyncIterator[Callable[..., AgentProcess]]:
    """Factory for echo agent processes; every one is stopped (and its log kept) after."""
    started: list[AgentProcess] = []

    def start(agent: Registered, rest_url: str, ws_url: str, **extra_env: str) -> AgentProcess:
        process = AgentProcess(
            echo_workspace,
            agent,
            rest_url,
            ws_url,
            tmp_path / f"agent-{agent.id[:8]}.log",
            extra_env=dict(extra_env),
        ).start()
        started.append(process)
        return process

    yield start
    # Stop in a thread: the emulator under test shares this event loop and must keep
    # answering (leave replies) while the agents shut down.
    await asyncio.gather(*(asyncio.to_thread(process.stop) for process in started))
    for process in started:  # pytest shows this only when the test failed
        lines = process.log_path.read_text(errors="replace").splitlines()
        print(f"--- last lines of {process.log_path.name}", *lines[-40:], sep="\n")


@pytest.fixture
def no_unhandled(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Fail the test if the emulator logged any `UNHANDLED` request during it."""
    caplog.set_level(logging.WARNING, logger="bandkit.emulator")
    yield
    lines = [r.getMessage() for r in caplog.records if "UNHANDLED" in r.getMessage()]
    assert lines == [], f"the emulator had no route for: {lines}"
