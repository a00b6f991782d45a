"""The one host-side write/read helper: atomic, private, never through a planted link."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from bandkit.fsio import (
    UnsafePathError,
    closed_to_others,
    may_write,
    read_regular,
    write_atomic,
    write_private,
)


def test_write_private_replaces_with_an_owner_only_file(tmp_path: Path) -> None:
    target = tmp_path / "nested" / "state.json"
    write_private(target, '{"a": 1}')
    write_private(target, '{"a": 2}')
    assert json.loads(target.read_text()) == {"a": 2}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]  # no temp left


def test_a_symlink_at_the_target_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    victim.chmod(0o644)
    target = tmp_path / "band.yaml"
    target.symlink_to(victim)
    write_atomic(target, "new", mode=0o640)
    assert victim.read_text() == "precious"
    assert stat.S_IMODE(victim.stat().st_mode) == 0o644
    assert not target.is_symlink()
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_hard_link_at_the_target_is_replaced_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "band.yaml"
    os.link(victim, target)
    write_private(target, "new")
    assert victim.read_text() == "precious"
    assert target.read_text() == "new"


def test_read_regular_returns_content_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"abc")
    path.chmod(0o640)
    assert read_regular(path) == (b"abc", 0o640)


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "directory", "fifo"])
def test_read_regular_refuses_links_and_special_files(tmp_path: Path, kind: str) -> None:
    victim = tmp_path / "victim"
    victim.write_text("secret")
    path = tmp_path / "band.yaml"
    if kind == "symlink":
        path.symlink_to(victim)
    elif kind == "hardlink":
        os.link(victim, path)
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    with pytest.raises(UnsafePathError) as caught:
        read_regular(path, what="band.yaml")
    assert str(path) in str(caught.value)
    assert "secret" not in str(caught.value)


def test_read_regular_of_a_missing_file_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "absent")


def test_write_atomic_never_writes_setuid_setgid_sticky_or_shared_write(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_atomic(target, "x", mode=0o7777)
    assert stat.S_IMODE(target.stat().st_mode) == 0o755


@pytest.mark.parametrize("dir_owner", [0, 1000])
def test_a_sandbox_file_is_0644_and_the_directorys_whatever_it_replaces(
    tmp_path: Path, dir_owner: int
) -> None:
    from bandkit.fsio import write_sandbox_file

    if os.geteuid() != 0 and dir_owner != os.geteuid():
        pytest.skip("giving a directory to another user needs root")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    old = workspace / "band.yaml"
    old.write_text("old")
    if os.geteuid() == 0:
        os.chown(workspace, dir_owner, dir_owner)
        os.chown(old, 1000 - dir_owner, 1000 - dir_owner)  # the other one of the two
    old.chmod(0o6777)
    write_sandbox_file(old, "new")
    info = old.stat()
    assert old.read_text() == "new"
    assert stat.S_IMODE(info.st_mode) == 0o644
    assert info.st_uid == (dir_owner if os.geteuid() == 0 else os.geteuid())


def test_closed_to_others_names_each_private_directory_on_the_way(tmp_path: Path) -> None:
    private = tmp_path / "private"
    inside = private / "open" / "run"
    inside.mkdir(parents=True)
    (private / "open").chmod(0o755)
    private.chmod(0o700)
    try:
        closed = closed_to_others(inside / "not-yet" / "deeper")
        assert private in closed
        assert private / "open" not in closed
        assert closed == sorted(closed, key=lambda p: len(p.parts))  # outermost first
    finally:
        private.chmod(0o755)
    assert private not in closed_to_others(inside)


def test_may_write_a_path_or_where_it_would_be_made(tmp_path: Path) -> None:
    assert may_write(tmp_path / "not" / "yet")
    assert not may_write(Path("/proc/1/nope"))
    plain = tmp_path / "file"
    plain.write_text("x")
    assert not may_write(plain / "below")  # a file where a directory would be made
