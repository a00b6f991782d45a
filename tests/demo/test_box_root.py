"""The demo's box root, as `demo.up` lays it out, when a local user got there first.

As root the box root is the predictable `/tmp/band-demo-0-<hash of the run dir>`: it holds
the staged workspaces and each box's `proxy.json`. Another local user can create that name
before the run (a directory of theirs, or a link to one), or between the layout's first
look and the mkdir. `make_home` must then refuse, naming the path and what to do, and
leave the planted thing as it found it (no chmod through a link, nothing put inside).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.demo import DemoError
from bandkit.demo.layout import DemoLayout

OTHER_UID = 1000
AS_ROOT = os.geteuid() == 0


@pytest.fixture
def layout(tmp_path: Path) -> Iterator[DemoLayout]:
    """A fresh run directory's layout (nothing at its box root yet), cleaned up after."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    found = DemoLayout.for_run_dir(run_dir)
    assert not os.path.lexists(found.box_root)
    yield found
    if found.box_root.is_symlink():
        found.box_root.unlink()
    elif found.box_root.exists() and found.box_root != run_dir / "demo-boxes":
        shutil.rmtree(found.box_root)


def other_users_dir(path: Path) -> Path:
    path.mkdir()
    path.chmod(0o777)
    if AS_ROOT:
        os.chown(path, OTHER_UID, OTHER_UID)
    return path


def snapshot(path: Path) -> tuple[int, int, list[str]]:
    info = path.stat()
    return stat.S_IMODE(info.st_mode), info.st_uid, sorted(p.name for p in path.iterdir())


@pytest.mark.skipif(not AS_ROOT, reason="a directory of another user needs root to make")
def test_a_box_root_another_user_made_first_is_refused(layout: DemoLayout) -> None:
    other_users_dir(layout.box_root)
    before = snapshot(layout.box_root)
    with pytest.raises(DemoError) as refused:
        DemoLayout.for_run_dir(layout.run_dir).make_home()
    assert str(layout.box_root) in str(refused.value)
    assert "remove it" in str(refused.value)
    assert snapshot(layout.box_root) == before


@pytest.mark.parametrize("when", ["before the run", "between the check and the mkdir"])
def test_a_link_planted_at_the_box_root_is_never_followed(
    layout: DemoLayout, tmp_path: Path, when: str
) -> None:
    """The link points at a directory of the planter's (the workspaces would be theirs),
    or at one of root's that the old chmod would have opened to everyone."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    victim.chmod(0o700)
    before = snapshot(victim)
    if when == "before the run":
        layout.box_root.symlink_to(victim)
        with pytest.raises(DemoError) as refused:
            DemoLayout.for_run_dir(layout.run_dir).make_home()
    else:
        chosen = DemoLayout.for_run_dir(layout.run_dir)  # the first look: nothing there
        layout.box_root.symlink_to(victim)  # the planter wins the race
        with pytest.raises(DemoError) as refused:
            chosen.make_home()
    assert str(layout.box_root) in str(refused.value)
    assert snapshot(victim) == before  # still 0700, nothing made inside


@pytest.mark.skipif(not AS_ROOT, reason="a directory of another user needs root to make")
def test_a_directory_planted_between_the_check_and_the_mkdir_is_refused(
    layout: DemoLayout,
) -> None:
    chosen = DemoLayout.for_run_dir(layout.run_dir)
    other_users_dir(layout.box_root)
    before = snapshot(layout.box_root)
    with pytest.raises(DemoError, match="belongs to uid 1000"):
        chosen.make_home()
    assert snapshot(layout.box_root) == before  # not chmod'ed to 0755, nothing inside


def test_a_box_root_of_ours_that_others_can_write_is_refused(layout: DemoLayout) -> None:
    """Ours, but mode 0777: anyone may have put a workspace in it already."""
    layout.box_root.mkdir()
    layout.box_root.chmod(0o777)
    with pytest.raises(DemoError, match="writable by group or others"):
        layout.make_home()
    assert stat.S_IMODE(layout.box_root.stat().st_mode) == 0o777


def test_a_fresh_box_root_is_ours_traversable_and_reused(layout: DemoLayout) -> None:
    layout.make_home()
    layout.make_home()  # the next run takes its own box root back (its caches stay)
    info = layout.box_root.lstat()
    assert stat.S_ISDIR(info.st_mode)
    assert info.st_uid == os.geteuid()
    assert stat.S_IMODE(info.st_mode) == 0o755
    assert stat.S_IMODE(layout.home.stat().st_mode) == 0o700
