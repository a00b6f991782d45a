"""Run manifest: record-before-create, atomic 0600 writes, reverse teardown, crash safety."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from bandkit import processes
from bandkit.manifest import Kind, Manifest, ManifestError, Resource, teardown

CANARY = "canary-sk-7f3e9a1b2c4d"


def _remove_dir(resource: Resource) -> None:
    if Path(resource.key).exists():
        shutil.rmtree(resource.key)


def _kill_tagged(resource: Resource) -> None:
    processes.terminate_tagged(resource.key, grace_s=5)


REMOVERS = {Kind.WORKSPACE: _remove_dir, Kind.PROCESS: _kill_tagged}


def test_record_writes_owner_only_file_before_returning(tmp_path: Path) -> None:
    path = tmp_path / "run" / "manifest.json"
    with Manifest.open(path, run_id="r1") as m:
        m.record(Kind.SANDBOX, "sb-1", runtime="local")
        assert path.exists()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        data = json.loads(path.read_text())
    assert data["run_id"] == "r1"
    assert data["resources"][0]["kind"] == "sandbox"
    assert data["resources"][0]["details"] == {"runtime": "local"}


def test_no_temp_files_left_and_reload_keeps_order(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    with Manifest.open(path) as m:
        for i in range(5):
            m.record(Kind.ROOM, f"room-{i}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json", "manifest.json.lock"]
    with Manifest.open(path) as m:
        assert [r.key for r in m.resources] == [f"room-{i}" for i in range(5)]


def test_record_twice_is_idempotent_and_update_merges(tmp_path: Path) -> None:
    with Manifest.open(tmp_path / "m.json") as m:
        first = m.record(Kind.AGENT, "a1", name="Echo")
        again = m.record(Kind.AGENT, "a1")
        assert again == first
        updated = m.update(first, id="uuid-1")
        assert updated.details == {"name": "Echo", "id": "uuid-1"}
        assert len(m.resources) == 1


def test_record_refuses_secret_values(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    with Manifest.open(path, secrets=[CANARY]) as m:
        with pytest.raises(ManifestError) as err:
            m.record(Kind.SECRET, "sb/host", value=CANARY)
        res = m.record(Kind.SECRET, "sb/host", host="h")
        with pytest.raises(ManifestError):
            m.update(res, note=f"x{CANARY}x")
    assert CANARY not in str(err.value)
    assert CANARY not in path.read_text()


def test_teardown_reverse_order_and_deletes_manifest_when_clean(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    order: list[str] = []
    with Manifest.open(path) as m:
        for key in ("a", "b", "c"):
            m.record(Kind.ROOM, key)
        report = teardown(m, {Kind.ROOM: lambda r: order.append(r.key)})
    assert order == ["c", "b", "a"]
    assert report.clean
    assert [r.key for r in report.removed] == ["c", "b", "a"]
    assert not path.exists()


def test_teardown_reports_each_failure_keeps_only_failed_entries(tmp_path: Path) -> None:
    path = tmp_path / "m.json"

    def flaky(resource: Resource) -> None:
        if resource.key in {"b", "d"}:
            raise RuntimeError(f"cannot remove {resource.key} with token {CANARY}")

    with Manifest.open(path) as m:
        for key in "abcde":
            m.record(Kind.ROOM, key)
        report = teardown(m, {Kind.ROOM: flaky}, redact=[CANARY])
    assert not report.clean
    assert [r.key for r, _ in report.failed] == ["d", "b"]
    assert all(CANARY not in msg and "***" in msg for _, msg in report.failed)
    assert "FAILED room:d: cannot remove d with token ***" in report.lines()
    with Manifest.open(path) as m:
        assert [r.key for r in m.resources] == ["b", "d"]
        # A second run with a working remover finishes the job and deletes the file.
        assert teardown(m, {Kind.ROOM: lambda r: None}).clean
    assert not path.exists()


def test_teardown_without_remover_for_kind_keeps_entry(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    with Manifest.open(path) as m:
        m.record(Kind.POLICY, "global/example.com")
        report = teardown(m, {})
    assert report.failed[0][1] == "no remover for kind 'policy'"
    assert path.exists()


def test_malformed_manifest_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text('{"schema_version": "1", "run_id": "x", "resources": [{"kind": "nope"}]}')
    with pytest.raises(ManifestError, match="malformed"), Manifest.open(path):
        pass


def test_second_opener_waits_then_fails_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bandkit.manifest as mod

    monkeypatch.setattr(mod, "LOCK_TIMEOUT_S", 0.2)
    path = tmp_path / "m.json"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD.format(path=str(path))], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with (
            pytest.raises(ManifestError, match="locked by another running task"),
            Manifest.open(path),
        ):
            pass
    finally:
        holder.kill()
        holder.wait()
    with Manifest.open(path) as m:  # kill -9 released the kernel lock
        assert m.resources == ()


_HOLD = textwrap.dedent(
    """
    import time
    from pathlib import Path
    from bandkit.manifest import Manifest
    with Manifest.open(Path({path!r})):
        print("locked", flush=True)
        time.sleep(600)
    """
)

# A task that records a temp workspace and a process, creates them, and is killed -9
# while the create is still "in progress" (STAGE picks the exact point).
_CRASHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from pathlib import Path
    from bandkit.manifest import Kind, Manifest
    from bandkit.processes import TAG_ENV
    path, workspace, tag, ready, stage = sys.argv[1:6]
    with Manifest.open(Path(path), run_id="crash") as m:
        m.record(Kind.WORKSPACE, workspace)
        Path(workspace).mkdir()
        (Path(workspace) / "band.yaml").write_text("x")
        m.record(Kind.PROCESS, tag)
        if stage == "spawned":
            env = {**os.environ, TAG_ENV: tag}
            subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                             env=env, start_new_session=True)
        Path(ready).write_text(stage)
        time.sleep(600)
    """
)


@pytest.mark.parametrize("stage", ["recorded", "spawned"])
def test_kill_9_mid_create_then_teardown_leaves_nothing(tmp_path: Path, stage: str) -> None:
    path = tmp_path / "run" / "manifest.json"
    workspace = tmp_path / "ws"
    tag = f"test-{uuid.uuid4().hex[:12]}"
    ready = tmp_path / "ready"
    crasher = subprocess.Popen(
        [sys.executable, "-c", _CRASHER, str(path), str(workspace), tag, str(ready), stage]
    )
    deadline = time.monotonic() + 30
    while not ready.exists():
        assert crasher.poll() is None, "crasher exited early"
        assert time.monotonic() < deadline, "crasher never reached its create step"
        time.sleep(0.02)
    os.kill(crasher.pid, signal.SIGKILL)
    crasher.wait()
    assert workspace.exists()
    assert bool(processes.tagged_pids(tag)) is (stage == "spawned")

    with Manifest.open(path) as m:
        assert [r.kind for r in m.resources] == [Kind.WORKSPACE, Kind.PROCESS]
        report = teardown(m, REMOVERS)
    assert report.clean, report.lines()
    assert not workspace.exists()
    assert processes.tagged_pids(tag) == []
    assert not path.exists()
    # Re-running teardown after a clean one is a no-op.
    with Manifest.open(path) as m:
        assert teardown(m, REMOVERS).removed == []


def test_a_writer_killed_before_its_rename_leaves_nothing_after_teardown(tmp_path: Path) -> None:
    """`kill -9` between a manifest write's temp file and its rename (the cluster's kill
    drills hit it) leaves that temp file; the next open removes it, so a clean teardown
    still leaves no directory behind."""
    home = tmp_path / "run"
    path = home / "m.json"
    with Manifest.open(path) as m:
        m.record(Kind.ROOM, "a")
    killed = textwrap.dedent(
        f"""
        import os
        from pathlib import Path
        from bandkit.manifest import Kind, Manifest
        os.replace = lambda *_a: os._exit(9)  # dies where a kill -9 before the rename would
        with Manifest.open(Path({str(path)!r})) as m:
            m.record(Kind.ROOM, "b")
        """
    )
    done = subprocess.run([sys.executable, "-c", killed], timeout=60, check=False)
    assert done.returncode == 9
    assert [p.name for p in home.glob(".m.json.*.tmp")] != []
    with Manifest.open(path) as m:
        assert [r.key for r in m.resources] == ["a"]
        assert teardown(m, {Kind.ROOM: lambda _r: None}).clean
    assert not home.exists()


def test_teardown_only_removes_the_kinds_named_and_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    gone: list[str] = []
    with Manifest.open(path) as m:
        m.record(Kind.AGENT, "agent")
        m.record(Kind.SANDBOX, "box")
        m.record(Kind.SECRET, "key")
        m.record(Kind.SANDBOX, "proxy")
        report = teardown(m, {Kind.SANDBOX: lambda r: gone.append(r.key)}, only=[Kind.SANDBOX])
    assert gone == ["proxy", "box"]
    assert report.clean
    assert [(r.kind, r.key) for r in Manifest.read(path)] == [
        (Kind.AGENT, "agent"),
        (Kind.SECRET, "key"),
    ]
