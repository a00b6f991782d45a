"""Host-side file writes and reads that never follow a link they did not make.

Everything the host writes, in its own run directory or inside a (hostile) sandbox's
workspace, goes through `write_private` / `write_atomic`: a temp file made with `mkstemp`
(O_EXCL, so a planted name is never opened) in the target's own directory, its mode set
through the file descriptor, fsynced, then renamed over the target. A rename replaces a
symlink at the target instead of writing through it. `read_regular` opens with O_NOFOLLOW
and refuses anything but a regular file with one link, so a sandbox cannot make the host
read (or republish) another file through a link it planted.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from bandkit.errors import BandkitError

PRIVATE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


class UnsafePathError(BandkitError):
    """A path the host was about to use is a link or not a regular file."""


def write_atomic(path: Path, data: str | bytes, *, mode: int = PRIVATE_MODE) -> None:
    """Replace `path` with `data` in one step; `path` itself is never opened.

    Missing parent directories are made with the default mode (callers that need a private
    directory make it themselves: a shared run directory must stay traversable for the
    sandbox uid). A symlink or hard link at `path` is replaced, not written through. The
    mode is set on the descriptor before any byte is written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_private(path: Path, text: str) -> None:
    """`write_atomic` with mode 0600: manifests, state, keys, run files."""
    write_atomic(path, text, mode=PRIVATE_MODE)


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
