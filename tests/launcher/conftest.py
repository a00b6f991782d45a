"""Fixtures for launcher tests: unit boxes under tmp_path, and the uid-1000 harness."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launcher.fakes import Box, write_project
from tests.launcher.harness import AGENT_UID, AgentBox, Harness, can_drop_to_agent, chown_tree


@pytest.fixture
def box(tmp_path: Path) -> Box:
    """Unit-test box (root-owned, under tmp_path) with a trivial project, no lock."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    write_project(ws)
    home.mkdir()
    return Box(root=tmp_path, ws=ws, home=home)


@pytest.fixture(scope="session")
def harness() -> Iterator[Harness]:
    reason = can_drop_to_agent()
    if reason:
        pytest.skip(reason)
    from bandkit.runtimes.sdk_home import build_sdk_home

    root = Path(tempfile.mkdtemp(prefix="launcher-e2e-", dir="/tmp"))
    root.chmod(0o755)
    try:
        sdk = build_sdk_home(root / "sdk", with_band_sdk=True)
        template = root / "template"
        write_project(template)
        subprocess.run(
            [str(sdk.uv), "lock", "--quiet", "--python", "/usr/bin/python3"],
            cwd=template,
            check=True,
            timeout=300,
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )
        cache = root / "uv-cache"
        cache.mkdir()
        chown_tree(cache, AGENT_UID)
        yield Harness(
            root=root,
            sdk_root=sdk.root,
            python=sdk.python,
            uv=sdk.uv,
            lock=template / "uv.lock",
            uv_cache=cache,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def agent_box(harness: Harness) -> Iterator[AgentBox]:
    root = Path(tempfile.mkdtemp(prefix="box-", dir=harness.root))
    root.chmod(0o755)
    ws, home = root / "ws", root / "home"
    write_project(ws, lock_source=harness.lock)
    home.mkdir()
    result = AgentBox(root=root, ws=ws, home=home)
    result.harness = harness
    result.write(result.config())
    try:
        yield result
    finally:
        shutil.rmtree(root, ignore_errors=True)
