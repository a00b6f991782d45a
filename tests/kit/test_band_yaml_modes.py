"""band.yaml as `kit.provision` and `kit.unprovision` leave it: a fixed mode and owner.

A sandbox that owns its workspace (the local runtime, a docker bind mount owned by uid
1000) made band.yaml mode 6777 before provisioning; the host's rewrite kept those bits, so
the file came back `-rwsrwsrwx root root`, and uid 1000 wrote an executable into it through
a shared mmap and ran it as euid 0. Now every host-side rewrite is 0644 and belongs to the
workspace directory's owner (root only when the directory is root's), whatever the old
file's mode and owner were.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bandkit.kit import commands as provision_run
from bandkit.kit.band_yaml import read_agent_id
from launcher.constants import PLACEHOLDER_AGENT_ID
from tests.kit.conftest import request_for
from tests.runtimes.helpers import Platform, echo_workspace

AS_ROOT = os.geteuid() == 0
SANDBOX_UID = 1000
HOSTILE_MODE = 0o6777


def plant_hostile(path: Path, *, owner: int | None) -> None:
    """What the sandbox does to a file in its workspace: setuid, setgid, world-writable."""
    if owner is not None and AS_ROOT:
        os.chown(path, owner, owner)
    path.chmod(HOSTILE_MODE)
    assert stat.S_IMODE(path.stat().st_mode) == HOSTILE_MODE


def assert_safe(path: Path, *, uid: int) -> None:
    info = path.lstat()
    mode = stat.S_IMODE(info.st_mode)
    assert stat.S_ISREG(info.st_mode)
    assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), f"{path}: mode {mode:o}"
    assert not mode & (stat.S_IWGRP | stat.S_IWOTH), f"{path}: mode {mode:o}"
    assert mode == 0o644, f"{path}: mode {mode:o}"
    assert mode & stat.S_IROTH  # the agent uid reads it in every runtime
    assert info.st_uid == uid, f"{path}: owner {info.st_uid}, expected {uid}"


@pytest.mark.parametrize("workspace_owner", ["sandbox", "host"])
def test_provision_and_unprovision_never_keep_a_hostile_mode(
    workspace_owner: str, platform: Platform, tmp_path: Path
) -> None:
    """Both rewrites (agent.id written, then the placeholder put back), for a workspace the
    sandbox owns (as root: chowned to 1000) and for one the host owns."""
    ws = echo_workspace(tmp_path, agent_id=None, rest_url=platform.rest_url, ws_url=platform.ws_url)
    sandbox_owned = workspace_owner == "sandbox" and AS_ROOT
    if sandbox_owned:
        os.chown(ws, SANDBOX_UID, SANDBOX_UID)
    expected_uid = SANDBOX_UID if sandbox_owned else os.geteuid()
    band_yaml = ws / "band.yaml"
    plant_hostile(band_yaml, owner=SANDBOX_UID if sandbox_owned else None)
    name = f"modes-{workspace_owner}"
    run_dir = tmp_path / "run"

    result = provision_run.run(
        request_for(platform, ws, name),
        runtime="local",
        run_dir=run_dir,
        api_key=platform.user_key,
        log=lambda _line: None,
    )
    assert read_agent_id(ws) == result.agent_id
    assert_safe(band_yaml, uid=expected_uid)

    # the sandbox tries again between provisioning and teardown (the host-owned case
    # stands for a file an older rewrite left hostile)
    plant_hostile(band_yaml, owner=SANDBOX_UID if sandbox_owned else None)
    report = provision_run.unprovision(name, run_dir=run_dir, api_key=platform.user_key)
    assert report.clean, report.lines()
    assert read_agent_id(ws) == PLACEHOLDER_AGENT_ID
    assert_safe(band_yaml, uid=expected_uid)
    assert sorted(p.name for p in ws.iterdir() if p.name.startswith(".band.yaml")) == []
