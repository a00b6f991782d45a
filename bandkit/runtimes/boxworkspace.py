"""The workspace a box's agent sees: the real one when its uid can reach it, else a copy.

As root each box runs as a uid of its own, which can enter a directory only through its
"other" permission bits. A repository cloned under /root (0700), or any `mktemp -d`
directory, is out of its reach. Then `agent_workspace` stages the workspace into the box
root (`<root>/workspace`), host-side, at every start: directories and regular files are
copied through file descriptors opened with O_NOFOLLOW (never through a link), symbolic
links are copied as links (their target is not read), anything else (fifos, sockets,
devices) is left out, and so are `.venv` and `__pycache__` (the box syncs its own venv).
Each copy keeps its source's permission bits less setuid, setgid, sticky and every write
bit but the owner's, and belongs to root: the box reads what it could have read in
place, and writes none of it. The staged directory itself is 0755 (the box must enter
it). Past `MAX_FILES` entries or `MAX_BYTES` the copy is refused, with the fix named.

The original workspace is never written by the box: changes there reach the box at its
next start. As a non-root user the agent runs as you and reads the workspace in place.
"""

from __future__ import annotations

import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from bandkit.errors import BandkitError

STAGED = "workspace"
SKIPPED = frozenset({".venv", "__pycache__"})
MAX_FILES = 20_000
MAX_BYTES = 512 * 1024 * 1024
KEEP_BITS = 0o755  # rwx for root, r-x for the box: no write, setuid, setgid or sticky bit
CHUNK = 1 << 20


class StageError(BandkitError):
    """The workspace could not be staged; the message names the directory and the fix."""


def _may(info: os.stat_result, uid: int, bits: int) -> bool:
    """Whether `uid` (no supplementary groups, gid == uid) has `bits` (a mask of r=4,
    w=2, x=1) on a file with this stat, by its mode bits."""
    if info.st_uid == uid:
        shift = 6
    elif info.st_gid == uid:
        shift = 3
    else:
        shift = 0
    return (info.st_mode >> shift) & bits == bits


def blocking_directory(workspace: Path, uid: int) -> Path | None:
    """The first directory, from / down to `workspace`, that `uid` cannot pass through
    (the workspace itself must be listable too); None when it can reach the workspace."""
    workspace = Path(workspace).absolute()
    for directory in (*reversed(workspace.parents), workspace):
        try:
            info = directory.stat()
        except OSError:
            return directory
        if uid == 0:
            continue
        needed = 5 if directory == workspace else 1  # r-x on the workspace, x above it
        if not _may(info, uid, needed):
            return directory
    return None


def agent_workspace(root: Path, workspace: Path, uid: int, *, fresh: bool = False) -> Path:
    """Where the box at `root` running as `uid` finds its workspace: `workspace` itself
    when `uid` can reach it, else the staged copy (made when missing, or `fresh`)."""
    blocked = blocking_directory(workspace, uid)
    if blocked is None:
        return Path(workspace)
    target = Path(root) / STAGED
    if fresh or not target.is_dir() or target.is_symlink():
        stage(workspace, target, blocked=blocked)
    return target


@dataclass
class _Budget:
    files: int = 0
    size: int = 0


def stage(source: Path, target: Path, *, blocked: Path | None = None) -> None:
    """Copy `source` to `target` (replacing it) as the module docstring says."""
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        target.unlink()
    elif target.exists():
        shutil.rmtree(target)
    why = f" (the box uid cannot enter {blocked})" if blocked is not None else ""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise StageError(f"cannot stage the workspace {source}{why}: {exc.strerror}") from None
    try:
        target.mkdir(mode=0o700)
        _copy_tree(fd, target, _Budget(), source)
    except StageError as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise StageError(
            f"{exc}; so the workspace {source} cannot be staged into the box{why}. Make it "
            f"reachable instead (`chmod o+x` on each directory above it, `o+rx` on it), or "
            "move it to a directory others can traverse (e.g. /srv or /opt)"
        ) from None
    except OSError as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise StageError(f"cannot stage the workspace {source}{why}: {exc}") from None
    finally:
        os.close(fd)
    os.chmod(target, 0o755)  # noqa: S103 - the box uid must enter its workspace


def _copy_tree(src_fd: int, dst: Path, budget: _Budget, shown: Path) -> None:
    with os.scandir(src_fd) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        info = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
        budget.files += 1
        if budget.files > MAX_FILES:
            raise StageError(f"more than {MAX_FILES} entries under {shown}")
        out = dst / name
        if stat.S_ISDIR(info.st_mode):
            if name in SKIPPED:
                continue
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            child = os.open(name, flags, dir_fd=src_fd)
            try:
                out.mkdir(mode=0o700)
                _copy_tree(child, out, budget, shown / name)
            finally:
                os.close(child)
            os.chmod(out, stat.S_IMODE(info.st_mode) & KEEP_BITS)
        elif stat.S_ISREG(info.st_mode):
            _copy_file(src_fd, name, out, budget, shown)
        elif stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(name, dir_fd=src_fd), out)
        # fifos, sockets and devices are not part of a workspace's copy


def _copy_file(src_fd: int, name: str, out: Path, budget: _Budget, shown: Path) -> None:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    fd = os.open(name, flags, dir_fd=src_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):  # swapped since the scan: leave it out
            return
        budget.size += info.st_size
        if budget.size > MAX_BYTES:
            raise StageError(f"more than {MAX_BYTES // (1024 * 1024)} MB under {shown}")
        wfd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(wfd, "wb") as writer, os.fdopen(fd, "rb", closefd=False) as reader:
            shutil.copyfileobj(reader, writer, CHUNK)
            os.fchmod(wfd, stat.S_IMODE(info.st_mode) & KEEP_BITS)
    finally:
        os.close(fd)
