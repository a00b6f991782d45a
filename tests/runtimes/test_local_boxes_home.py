"""The local runtime's shared boxes home (`BOXES_HOME`, as root): a run directory the box
uids cannot enter gets its boxes root there, and that root outlives the run directory
(the uv caches it parks are kept for the next box of a name). Each root records the run
directory it serves, and the next box made sweeps the roots whose run directory is gone
and that hold no box (or that have no record: an earlier version made them): deleted
clones and test runs leave nothing there for good."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from bandkit.runtimes import boxuids, hostbox, local
from bandkit.runtimes.base import SandboxSpec

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="BOXES_HOME is used as root only")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A boxes home, a uid pool and box starts of this test's own (nothing runs)."""
    path = tmp_path / "var-lib" / "bandkit" / "local-boxes"
    monkeypatch.setattr(local, "BOXES_HOME", path)
    pool = boxuids.UidPool(leases=tmp_path / "leases", first=1_900_060_000, count=64, temp_dirs=())
    monkeypatch.setattr(boxuids, "POOL", pool)
    monkeypatch.setattr(hostbox, "start", lambda root, **_kw: None)
    return path


def _provisioned(run_dir: Path, workspace: Path, *, remove: bool) -> local.LocalRuntime:
    """A box made in `run_dir` (private: its root goes under BOXES_HOME), with a parked
    cache as a box leaves one, then removed (`remove`) as `kit.unprovision` does."""
    runtime = local.LocalRuntime(run_dir)
    runtime.create(SandboxSpec(name="agent", workspaces=(workspace,)))
    cache = runtime.boxes_root() / local.CACHES / "agent" / "wheels-v8"
    cache.mkdir(parents=True)
    (cache / "some.whl").write_bytes(b"wheel")
    if remove:
        runtime.remove("agent")
    return runtime


def test_a_gone_run_directorys_caches_are_swept_by_the_next_box(home: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    gone = _provisioned(private / "gone" / ".run", workspace, remove=True).boxes_root()
    kept = _provisioned(private / "kept" / ".run", workspace, remove=True).boxes_root()
    busy = _provisioned(private / "busy" / ".run", workspace, remove=False).boxes_root()
    assert {gone.parent, kept.parent, busy.parent} == {home}
    assert (gone / local.OWNER).read_text().strip() == str(private / "gone" / ".run")
    legacy = home / "0123456789abcdef"  # made before roots had a record: whose is unknown
    (legacy / local.CACHES / "agent").mkdir(parents=True)
    legacy_box = home / "00112233445566ff"  # the same, still holding a box
    (legacy_box / "agent").mkdir(parents=True)
    victim = tmp_path / "victim"
    (victim / local.CACHES).mkdir(parents=True)
    (victim / local.OWNER).write_text(str(tmp_path / "no-such-run") + "\n")
    (home / "fedcba9876543210").symlink_to(victim)  # a link there is never followed
    shutil.rmtree(private / "gone")
    shutil.rmtree(private / "busy")  # its box was never removed: it may come back

    made = local.LocalRuntime(private / "next" / ".run")
    made.create(SandboxSpec(name="agent", workspaces=(workspace,)))

    assert not gone.exists()
    assert (kept / local.CACHES / "agent" / "wheels-v8" / "some.whl").is_file()
    assert (busy / "agent").is_dir()
    assert not legacy.exists()
    assert (legacy_box / "agent").is_dir()
    assert (victim / local.CACHES).is_dir()
    assert made.boxes_root().is_dir()
    assert made.warnings[-1] == (
        f"local: removed 2 boxes directories in {home} that held only caches, of run "
        "directories that no longer exist (or unrecorded: made by an earlier version)"
    )


def test_a_run_directory_that_comes_back_finds_its_caches(home: Path, tmp_path: Path) -> None:
    """A run directory is checked where it is now: the same path used again (a clone made
    again in place) takes its root back, record and parked caches included."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    run_dir = private / "clone" / ".run"
    first = _provisioned(run_dir, workspace, remove=True).boxes_root()
    shutil.rmtree(private / "clone")
    again = local.LocalRuntime(run_dir)
    again.create(SandboxSpec(name="agent", workspaces=(workspace,)))
    assert again.boxes_root() == first
    assert (first / local.CACHES / "agent" / "wheels-v8" / "some.whl").is_file()
    assert not any("removed" in line for line in again.warnings)
