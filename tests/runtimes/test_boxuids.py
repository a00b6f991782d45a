"""Box uid leases: one uid per box root, unique across concurrent allocators, never a uid
the host already uses (a named user or group, a subordinate range, a running process),
written before it is handed out, reclaimed only when its box is gone and runs nothing,
and released with what it left in the shared temporary directories."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from bandkit import processes
from bandkit.runtimes import boxuids
from bandkit.runtimes.boxuids import UidError, UidPool
from tests.support.wait import wait_for

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="running as another uid needs root")


def pool(tmp_path: Path, first: int = boxuids.UID_FIRST, count: int = 16) -> UidPool:
    temp = tmp_path / "shared-tmp"
    temp.mkdir(exist_ok=True)
    return UidPool(leases=tmp_path / "leases", first=first, count=count, temp_dirs=(temp,))


def test_the_reserved_range_is_where_nothing_else_allocates() -> None:
    first, last = boxuids.UID_FIRST, boxuids.UID_FIRST + boxuids.UID_COUNT - 1
    assert first > 1_879_048_191  # past systemd's container range (and SUB_UID_MAX)
    assert last < 2_147_352_576  # below systemd's foreign range and 2^31
    login_defs = Path("/etc/login.defs")
    if login_defs.is_file():
        for line in login_defs.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] in ("UID_MAX", "SUB_UID_MAX", "SUB_GID_MAX"):
                assert int(parts[1]) < first, line


def test_each_root_gets_its_own_uid_leased_before_it_is_returned(tmp_path: Path) -> None:
    uids = pool(tmp_path)
    a, b = tmp_path / "boxes" / "a", tmp_path / "boxes" / "b"

    uid_a, uid_b = uids.allocate(a), uids.allocate(b)

    assert uid_a != uid_b
    assert {uid_a, uid_b} <= set(range(uids.first, uids.first + uids.count))
    assert uids.allocate(a) == uid_a  # the same box keeps its uid
    assert uids.lease_for(a) == uid_a
    lease = json.loads((uids.leases / str(uid_a)).read_text())
    assert lease == {"root": str(a)}
    assert stat.S_IMODE(uids.leases.stat().st_mode) == 0o700
    assert a.is_dir()  # made with its lease: a lease whose root is gone is a dead box's


def test_concurrent_allocators_never_share_a_uid(tmp_path: Path) -> None:
    uids = pool(tmp_path, count=64)
    code = (
        "import sys; from pathlib import Path; from bandkit.runtimes.boxuids import UidPool; "
        f"p = UidPool(leases=Path({str(uids.leases)!r}), first={uids.first}, count=64, "
        f"temp_dirs=()); print(p.allocate(Path(sys.argv[1])))"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(tmp_path / "boxes" / f"b{i}")],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    got = [int(p.communicate(timeout=15)[0]) for p in procs]
    assert len(set(got)) == 8


def test_a_uid_the_host_names_or_hands_out_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    subuid = tmp_path / "subuid"
    subuid.write_text(f"someone:{boxuids.UID_FIRST}:3\n")
    monkeypatch.setattr(boxuids, "SUBID_FILES", (subuid,))
    assert pool(tmp_path).allocate(tmp_path / "box") == boxuids.UID_FIRST + 3

    nobody = 65534  # named in every passwd
    named = UidPool(leases=tmp_path / "l2", first=nobody, count=2, temp_dirs=())
    assert named.allocate(tmp_path / "box2") == nobody + 1


@ROOT_ONLY
def test_a_uid_some_process_runs_as_is_skipped(tmp_path: Path) -> None:
    uid = boxuids.UID_FIRST + boxuids.UID_COUNT - 2  # the range's end: no box there now
    busy = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "30"]
    )
    try:
        wait_for(lambda: processes.owner(busy.pid) == uid, 5, "setpriv")
        uids = pool(tmp_path, first=uid, count=2)
        assert uids.allocate(tmp_path / "box") == uid + 1
    finally:
        busy.kill()
        busy.wait()


def test_release_gives_the_uid_back_with_what_it_left_in_shared_temp(tmp_path: Path) -> None:
    uids = pool(tmp_path)
    root = tmp_path / "boxes" / "a"
    uid = uids.allocate(root)
    temp = uids.temp_dirs[0]
    left = [temp / "left-file", temp / "left-dir", temp / "left-link"]
    left[0].write_text("x")
    (left[1] / "deep").mkdir(parents=True)
    left[2].symlink_to(tmp_path / "victim")
    (tmp_path / "victim").write_text("kept")
    other = temp / "someone-elses"
    other.write_text("kept")
    if os.geteuid() == 0:
        for path in left:
            os.lchown(path, uid, uid)
    else:
        uids = UidPool(leases=uids.leases, first=uids.first, count=uids.count, temp_dirs=())

    uids.release(uid, root)

    assert uids.lease_for(root) is None
    if os.geteuid() == 0:
        assert not any(p.exists() or p.is_symlink() for p in left)
        assert other.read_text() == "kept"
        assert (tmp_path / "victim").read_text() == "kept"  # a link is removed, not followed
    assert uids.allocate(tmp_path / "boxes" / "b") != uid  # the next one moves on


def test_release_refuses_another_root_and_a_uid_still_running(tmp_path: Path) -> None:
    uids = pool(tmp_path)
    root = tmp_path / "boxes" / "a"
    uid = uids.allocate(root)
    uids.release(uid, tmp_path / "boxes" / "not-a")  # not that box's uid: nothing happens
    assert uids.lease_for(root) == uid
    if os.geteuid() != 0:
        return
    busy = subprocess.Popen(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "30"]
    )
    try:
        wait_for(lambda: processes.owner(busy.pid) == uid, 5, "setpriv")
        with pytest.raises(UidError, match="still runs processes"):
            uids.release(uid, root)
        assert uids.lease_for(root) == uid
    finally:
        busy.kill()
        busy.wait()


def test_a_dead_boxs_lease_is_reclaimed_and_a_live_one_never(tmp_path: Path) -> None:
    uids = pool(tmp_path, count=1)
    dead, live = tmp_path / "boxes" / "dead", tmp_path / "boxes" / "live"
    uid = uids.allocate(dead)
    with pytest.raises(UidError, match="every uid from"):
        uids.allocate(live)  # the one uid is held by a box whose root exists

    shutil.rmtree(dead)  # a killed run's box, gone without its release

    assert uids.allocate(live) == uid
    assert uids.lease_for(dead) is None


def test_a_lease_directory_that_is_not_ours_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    (tmp_path / "leases").symlink_to(real)
    with pytest.raises(UidError, match="not a directory of this user"):
        pool(tmp_path).allocate(tmp_path / "box")
    assert list(real.iterdir()) == []
