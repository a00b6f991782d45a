"""Fixtures: an in-process emulator (the canary user key) for the conductor's tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from bandkit.emulator.server import Emulator, EmulatorConfig
from tests.demo.fakes import USER_KEY


@pytest_asyncio.fixture
async def emu() -> AsyncIterator[Emulator]:
    emulator = Emulator(EmulatorConfig(), user_key=USER_KEY)
    await emulator.startup()
    try:
        yield emulator
    finally:
        await emulator.shutdown(2.0)
