"""Staging a workspace the box uid cannot reach (`boxworkspace`): the copy follows no
link, keeps every file as private as it was (less any write, setuid or setgid bit), leaves
out what is not a file, a directory or a link, and a workspace too big to copy is refused
with the directory and the fix named."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.runtimes import boxworkspace
from bandkit.runtimes.boxworkspace import StageError

BOX_UID = 1_900_065_534  # a box uid's place in the reserved range
VICTIM = "root-only: canary-box-workspace-3f9a1c\n"


@pytest.fixture
def private_parent() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sec-stage-"))  # 0700, like /root
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_workspace(parent: Path) -> Path:
    ws = parent / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "main.py").write_text("print('hi')\n")
    (ws / "run.sh").write_text("#!/bin/sh\n")
    (ws / "run.sh").chmod(0o4777)  # setuid and world-writable: neither survives
    (ws / "pkg" / "mod.py").write_text("x = 1\n")
    (ws / "secret.env").write_text("KEY=private\n")
    (ws / "secret.env").chmod(0o600)
    (ws / ".venv" / "bin").mkdir(parents=True)
    (ws / ".venv" / "bin" / "python").write_text("big")
    os.mkfifo(ws / "pipe")
    victim = parent / "victim.txt"
    victim.write_text(VICTIM)
    victim.chmod(0o600)
    (ws / "link-to-victim").symlink_to(victim)
    (ws / "pkg" / "link-up").symlink_to("..")
    return ws


def test_the_first_unreachable_directory_is_named(private_parent: Path) -> None:
    ws = make_workspace(private_parent)
    assert boxworkspace.blocking_directory(ws, BOX_UID) == private_parent
    private_parent.chmod(0o711)
    assert boxworkspace.blocking_directory(ws, BOX_UID) is None
    ws.chmod(0o711)  # enterable, not listable: still out of reach
    assert boxworkspace.blocking_directory(ws, BOX_UID) == ws


def test_the_staged_copy_follows_no_link_and_keeps_files_private(private_parent: Path) -> None:
    ws = make_workspace(private_parent)
    box = private_parent / "box"
    box.mkdir()

    seen = boxworkspace.agent_workspace(box, ws, BOX_UID, fresh=True)

    assert seen == box / boxworkspace.STAGED
    assert stat.S_IMODE(seen.stat().st_mode) == 0o755
    assert (seen / "main.py").read_text() == "print('hi')\n"
    assert (seen / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert stat.S_IMODE((seen / "run.sh").stat().st_mode) == 0o755  # no setuid, no o+w
    assert stat.S_IMODE((seen / "secret.env").stat().st_mode) == 0o600  # still private
    assert os.readlink(seen / "link-to-victim") == str(private_parent / "victim.txt")
    assert os.readlink(seen / "pkg" / "link-up") == ".."
    assert not (seen / "pipe").exists()
    assert not (seen / ".venv").exists()
    for path in (seen, *seen.rglob("*")):
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (os.geteuid(), os.getegid())
        assert stat.S_IMODE(info.st_mode) & 0o7022 == 0 or stat.S_ISLNK(info.st_mode)
        if path.is_file() and not path.is_symlink():
            assert VICTIM not in path.read_text(errors="replace")


def test_a_restart_stages_the_workspace_afresh(private_parent: Path) -> None:
    ws = make_workspace(private_parent)
    box = private_parent / "box"
    box.mkdir()
    seen = boxworkspace.agent_workspace(box, ws, BOX_UID, fresh=True)
    (ws / "main.py").write_text("print('edited')\n")
    (ws / "pkg" / "mod.py").unlink()

    assert boxworkspace.agent_workspace(box, ws, BOX_UID) == seen  # no restart: as it was
    assert (seen / "pkg" / "mod.py").exists()
    boxworkspace.agent_workspace(box, ws, BOX_UID, fresh=True)

    assert (seen / "main.py").read_text() == "print('edited')\n"
    assert not (seen / "pkg" / "mod.py").exists()


def test_a_reachable_workspace_is_used_in_place(private_parent: Path) -> None:
    ws = make_workspace(private_parent)
    private_parent.chmod(0o755)
    box = private_parent / "box"
    box.mkdir()
    assert boxworkspace.agent_workspace(box, ws, BOX_UID, fresh=True) == ws
    assert not (box / boxworkspace.STAGED).exists()


def test_a_workspace_too_big_to_stage_is_refused_with_the_fix(
    private_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = make_workspace(private_parent)
    box = private_parent / "box"
    box.mkdir()
    monkeypatch.setattr(boxworkspace, "MAX_FILES", 3)

    with pytest.raises(StageError) as caught:
        boxworkspace.agent_workspace(box, ws, BOX_UID, fresh=True)

    message = str(caught.value)
    assert str(ws) in message
    assert f"cannot enter {private_parent}" in message
    assert "chmod o+x" in message
    assert not (box / boxworkspace.STAGED).exists()  # nothing half-copied left
