"""Fixtures for the automated smoke: a scratch run dir the agent uid can enter (the boxes'
SDK home is the session's `agent_sdk`). Its helpers are in tests/smoke/support.py."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtimes.helpers import scratch_dir


@pytest.fixture
def run_dir() -> Iterator[Path]:
    path = scratch_dir("smoke-")
    yield path
    shutil.rmtree(path, ignore_errors=True)
