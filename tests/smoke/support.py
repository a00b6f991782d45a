"""What the smoke tests share (local and docker runtimes alike): the report's drill rows, a
canary user key planted for the smoke's own platform, and the check that a finished run
left nothing behind."""

from __future__ import annotations

import os
from pathlib import Path

from bandkit import processes
from bandkit.runtimes.local import LocalRuntime
from smoke.state import SmokeState

CANARY_USER_KEY = "canary-smoke-user-key-5be1c07d9a"
ROWS = ("Initial round trip", "Network cut", "Sleep/wake", "Daemon restart")


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


def local_boxes(run_dir: Path) -> Path:
    """Where the smoke's local boxes live: under `run_dir`, or (as root, when the box uid
    cannot enter `run_dir`) the local runtime's own directory outside it."""
    return LocalRuntime(run_dir / "smoke-kit" / "runtimes" / "local").boxes_root()


def _processes_of(run_dir: Path) -> list[int]:
    """Pids of processes of this run dir: box and proxy processes (tagged with a path
    under it or under its boxes root) and the platform (its argv names files under it)."""
    markers = (str(run_dir).encode(), str(local_boxes(run_dir)).encode())
    tag = processes.TAG_ENV.encode()
    me = os.getpid()

    def of_run(p: processes.Proc) -> bool:
        tags = [v for v in p.environ if v.startswith(tag)]
        named = any(m in t for t in tags for m in markers) or markers[0] in p.cmdline
        return p.pid != me and named

    return processes.scan(of_run)


def assert_nothing_left(run_dir: Path, state: SmokeState) -> None:
    assert state.unreaped == []
    assert (state.agent_id, state.room_id) == ("", "")
    assert not list((run_dir / "smoke-kit").rglob("manifest.json"))
    assert not list((run_dir / "smoke-kit").rglob("keychain/*.json"))
    assert not (run_dir / "smoke-kit" / "workspaces" / state.run_id).exists()
    assert not (run_dir / "smoke-platform" / "platform.json").exists()  # platform stopped
    assert not (run_dir / "smoke-platform" / "platform-user-key").exists()
    assert _processes_of(run_dir) == []
    assert state.observations["leftovers"].startswith("none")
