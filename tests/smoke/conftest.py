"""Fixtures for the automated smoke: a scratch run dir the agent uid can enter, a shared
SDK home for the boxes (as root), a canary user key for the smoke's own platform."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtimes.helpers import agent_sdk_env, scratch_dir

CANARY_USER_KEY = "canary-smoke-user-key-5be1c07d9a"


@pytest.fixture(scope="session")
def agent_sdk() -> Iterator[None]:
    with agent_sdk_env():
        yield


@pytest.fixture
def run_dir() -> Iterator[Path]:
    path = scratch_dir("smoke-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def plant_user_key(run_dir: Path, key: str = CANARY_USER_KEY) -> Path:
    """The key the smoke's local platform will use (service.up keeps an existing file)."""
    where = run_dir / "smoke-platform"
    where.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = where / "platform-user-key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(key + "\n")
    return path


def all_text(root: Path) -> str:
    """Every regular file under `root`, as text."""
    return "\n".join(
        p.read_text(encoding="utf-8", errors="replace")
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink()
    )
