"""Host-side file writes and reads that never follow a link they did not make.

Everything the host writes, in its own run directory or inside a (hostile) sandbox's
workspace, goes through `write_private` / `write_atomic`: a temp file made with `mkstemp`
(O_EXCL, so a planted name is never opened) in the target's own directory, its mode set
through the file descriptor, fsynced, then renamed over the target. A rename replaces a
symlink at the target instead of writing through it. `read_regular` opens with O_NOFOLLOW
and refuses anything but a regular file with one link, so a sandbox cannot make the host
read (or republish) another file through a link it planted.

Modes and owners are decided here, never copied from an old file: `write_atomic` strips
the setuid, setgid and sticky bits and group/other write from whatever mode it is given,
and `write_sandbox_file` (a file in a directory a sandbox can write: its workspace) always
writes 0644, owned as root by the directory's owner. A directory the host makes at a fixed
or predictable path goes through `own_dir`, which refuses a link, someone else's
directory or one others can write (a local user may have made it first). Whether another
uid (a local box's) could pass through to a path is `closed_to_others`; whether we may
write or make one, `may_write`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from pathlib import Path

from bandkit.errors import BandkitError

PRIVATE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700
SANDBOX_FILE_MODE = 0o644  # readable by the agent uid in every runtime, writable by none
# Never on a file the host writes: setuid/setgid (a root-owned 6777 band.yaml became a
# root shell for the sandbox), sticky, and write for group or others.
UNSAFE_MODE_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX | stat.S_IWGRP | stat.S_IWOTH


class UnsafePathError(BandkitError):
    """A path the host was about to use is a link or not a regular file."""


def safe_mode(mode: int) -> int:
    """`mode`'s permission bits without `UNSAFE_MODE_BITS`."""
    return stat.S_IMODE(mode) & ~UNSAFE_MODE_BITS


def write_atomic(
    path: Path, data: str | bytes, *, mode: int = PRIVATE_MODE, owner: tuple[int, int] | None = None
) -> None:
    """Replace `path` with `data` in one step; `path` itself is never opened.

    Missing parent directories are made with the default mode (callers that need a private
    directory make it themselves: a shared run directory must stay traversable for the
    sandbox uid). A symlink or hard link at `path` is replaced, not written through. The
    owner (uid, gid; root only) and then `safe_mode(mode)` are set on the descriptor
    before any byte is written: never setuid, setgid, sticky, group- or world-writable.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if owner is not None:
            os.fchown(fd, *owner)
        os.fchmod(fd, safe_mode(mode))
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def remove_stale_temps(path: Path) -> int:
    """Remove the temp files a `write_atomic` of `path` left when it was killed before its
    rename (`kill -9`, a crash); how many. Only for a caller that holds `path`'s lock, so
    no write of it is in flight; a link with such a name is unlinked, never followed."""
    removed = 0
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()
            removed += 1
    return removed


def remove_path(path: Path) -> None:
    """Remove `path` whatever it is, never following a link: a link or a file is
    unlinked, a directory removed with all it holds; absent is success."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def write_private(path: Path, text: str) -> None:
    """`write_atomic` with mode 0600: manifests, state, keys, run files."""
    write_atomic(path, text, mode=PRIVATE_MODE)


def write_sandbox_file(path: Path, data: str | bytes) -> None:
    """Write a file into a directory a sandbox can write (its workspace's band.yaml).

    Its mode is always `SANDBOX_FILE_MODE` (0644), whatever the file it replaces had. As
    root it belongs to the owner of the directory that holds it (a sandbox that owns its
    workspace gets back a file it could have replaced anyway, never a root-owned one; a
    root-owned staged workspace keeps a root-owned file); otherwise to us.
    """
    owner = None
    if os.geteuid() == 0:
        info = os.stat(path.parent)
        owner = (info.st_uid, info.st_gid)
    write_atomic(path, data, mode=SANDBOX_FILE_MODE, owner=owner)


def own_dir(path: Path, *, mode: int, what: str = "directory", parents: bool = False) -> Path:
    """`path` as a real directory of ours at `mode` (which `safe_mode` bounds), made if absent.

    Refuses (UnsafePathError, naming the path and the fix) a symbolic link, a
    non-directory, a directory owned by another user, and one group or others can write:
    at a predictable path (under /tmp) someone else may have made it first to own what we
    put in it. The mode is set through a descriptor opened without following links.
    """
    if parents:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    made = True
    try:
        os.mkdir(path, PRIVATE_DIR_MODE)
    except FileExistsError:
        made = False
    fix = f"check what it holds, remove it (rm -rf {path}) and re-run"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePathError(
                f"{what} {path} is a symbolic link or not a directory, not one we made; {fix}"
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise UnsafePathError(
                f"{what} {path} belongs to uid {info.st_uid}, not to us (uid {os.geteuid()}): "
                f"another user may have made it to take over what we put in it; {fix}"
            )
        if not made and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafePathError(
                f"{what} {path} is writable by group or others (mode "
                f"{stat.S_IMODE(info.st_mode):o}): someone else may have put files in it; {fix}"
            )
        os.fchmod(fd, safe_mode(mode))
    finally:
        os.close(fd)
    return path


def closed_to_others(path: Path) -> list[Path]:
    """The existing directories from / down to `path` (itself included) that other users
    cannot pass through (no o+x bit), outermost first; [] when every one lets them by.
    The walk stops at the first directory that does not exist (or cannot be read): what
    is made below it later takes the mode its maker gives it."""
    closed = []
    for directory in (*reversed(path.absolute().parents), path.absolute()):
        try:
            mode = directory.stat().st_mode
        except OSError:
            break
        if not mode & stat.S_IXOTH:
            closed.append(directory)
    return closed


def may_write(path: Path) -> bool:
    """Whether this user can write `path`, or make it: the nearest existing directory
    on the way (`path` itself first) lets it write and enter."""
    for candidate in (path, *path.absolute().parents):
        if candidate.exists():
            return candidate.is_dir() and os.access(candidate, os.W_OK | os.X_OK)
    return False


def _fsync_dir(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def read_regular(path: Path, *, what: str = "file") -> tuple[bytes, int]:
    """Read a regular, singly linked file without following a final symlink.

    Returns (content, permission bits). Raises UnsafePathError for a symlink, a hard link,
    a directory or any special file; FileNotFoundError when absent.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP: the final component is a symlink
            raise UnsafePathError(
                f"{what} {path} is a symbolic link; replace it with a regular file"
            ) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePathError(f"{what} {path} is not a regular file")
        if info.st_nlink != 1:
            raise UnsafePathError(
                f"{what} {path} has {info.st_nlink} hard links; replace it with a plain copy"
            )
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), stat.S_IMODE(info.st_mode)
    finally:
        os.close(fd)
