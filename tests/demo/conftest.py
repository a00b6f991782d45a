"""Fixtures: an in-process emulator (the canary user key) for the conductor's tests, and
a local platform in a run directory for the end-to-end tests (one per module)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from bandkit.emulator.server import Emulator, EmulatorConfig
from tests.demo.fakes import USER_KEY
from tests.demo.support import Platform, start_platform


@pytest_asyncio.fixture
async def emu() -> AsyncIterator[Emulator]:
    emulator = Emulator(EmulatorConfig(), user_key=USER_KEY)
    await emulator.startup()
    try:
        yield emulator
    finally:
        await emulator.shutdown(2.0)


@pytest.fixture(scope="module")
def platform(agent_sdk: None) -> Iterator[Platform]:
    """The module's run directory and local platform (warm uv caches after the first run)."""
    yield from start_platform()
