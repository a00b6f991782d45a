"""One uid per local box, leased from a reserved range under a host-wide lock.

As root, each box of the local runtime (and of the sbx simulator, which runs boxes too)
runs as a uid no other box, user or service has: another box cannot read its
`/proc/<pid>/environ` (its proxy token), signal it, or write its files, and teardown
stops it by that uid (every process of it, whatever it did to its environment).

The range is `UID_FIRST` .. `UID_FIRST + UID_COUNT - 1` (1 900 000 000 .. 1 900 065 535),
chosen where nothing on a Linux host hands out ids: above `UID_MAX` (60000, regular users)
and `SUB_UID_MAX` / `SUB_GID_MAX` (600100000 in Debian's /etc/login.defs: `useradd` gives
each user 65536 subordinate ids from 100000 up, and rootless containers' processes run
as those), outside systemd's container range (524288 .. 1879048191) and below 2^31
(uids from 2147483648 on trip signed-integer bugs; systemd keeps its foreign range,
2147352576 .., there). A uid is also skipped when the user or group database names it,
when /etc/subuid or /etc/subgid hands it out, or when some process already runs as it.

Leases live in `LEASES` (/var/lib/bandkit/uids, root's, 0700): one file per uid,
naming the box root it belongs to, written under `LEASES/.lock` before the uid is used.
Allocation starts after the last uid handed out (so a released uid is not reused at
once), and first reclaims a lease whose box root is gone and whose uid runs nothing: what
a killed run left. Releasing a uid also removes what it left at the top of the shared
temporary directories (/tmp, /var/tmp, /dev/shm), so the next holder finds nothing of it.

Not root: every box runs as you (`os.getuid()`), no lease is taken, and nothing here
isolates boxes from each other (the runtime says so in its warning).
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from bandkit import processes
from bandkit.errors import BandkitError
from bandkit.fsio import PRIVATE_DIR_MODE, write_private

UID_FIRST = 1_900_000_000
UID_COUNT = 65_536
LEASES = Path("/var/lib/bandkit/uids")
SUBID_FILES = (Path("/etc/subuid"), Path("/etc/subgid"))
SHARED_TEMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))  # noqa: S108 - swept by uid
LOCK_TIMEOUT_S = 30.0
CURSOR = "next"


class UidError(BandkitError):
    """No box uid could be leased or released; the message says what to do."""


def isolated() -> bool:
    """True when boxes get a uid each (this process is root)."""
    return os.geteuid() == 0


@dataclass(frozen=True)
class UidPool:
    """The reserved range and its lease directory (tests use a small one of their own)."""

    leases: Path = LEASES
    first: int = UID_FIRST
    count: int = UID_COUNT
    temp_dirs: tuple[Path, ...] = SHARED_TEMP

    # -- the lock and the lease files

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self._ensure_dir()
        lock = FileLock(str(self.leases / ".lock"))
        try:
            lock.acquire(timeout=LOCK_TIMEOUT_S)
        except Timeout:
            raise UidError(
                f"the box uid leases in {self.leases} stayed locked for {LOCK_TIMEOUT_S:.0f}s; "
                "another run is allocating: try again"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def _ensure_dir(self) -> None:
        self.leases.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        info = self.leases.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise UidError(f"{self.leases} is not a directory of this user; remove it and re-run")
        os.chmod(self.leases, PRIVATE_DIR_MODE)

    def _leases(self) -> dict[int, str]:
        """uid -> the box root its lease names."""
        found: dict[int, str] = {}
        for entry in self.leases.iterdir():
            if not entry.name.isdigit() or entry.is_symlink():
                continue
            try:
                found[int(entry.name)] = str(json.loads(entry.read_text(encoding="utf-8"))["root"])
            except (OSError, ValueError, KeyError, TypeError):
                found[int(entry.name)] = ""  # unreadable: held, never handed out again
        return found

    # -- the public verbs

    def lease_for(self, root: Path) -> int | None:
        """The uid leased to the box at `root`, if any."""
        wanted = str(Path(root).absolute())
        if not self.leases.is_dir():
            return None
        return next((uid for uid, owner in self._leases().items() if owner == wanted), None)

    def allocate(self, root: Path) -> int:
        """The uid of the box at `root`: its lease, or a new one (written before return)."""
        wanted = str(Path(root).absolute())
        with self._locked():
            leases = self._leases()
            held = next((uid for uid, owner in leases.items() if owner == wanted), None)
            if held is not None:
                return held
            busy = processes.live_uids()
            for uid, owner in list(leases.items()):
                if owner and not Path(owner).exists() and uid not in busy:
                    self._drop(uid)  # a killed run's: its box is gone and runs nothing
                    del leases[uid]
            taken = set(leases) | busy | _subordinate_ids(self.first, self.count)
            start = self._cursor()
            for step in range(self.count):
                uid = self.first + (start - self.first + step) % self.count
                if uid in taken or _named(uid):
                    continue
                write_private(self.leases / str(uid), json.dumps({"root": wanted}) + "\n")
                write_private(self.leases / CURSOR, f"{uid + 1}\n")
                # The root exists from now on: a lease whose root is gone is reclaimable.
                Path(wanted).mkdir(mode=0o755, parents=True, exist_ok=True)
                return uid
        raise UidError(
            f"every uid from {self.first} to {self.first + self.count - 1} is leased or in "
            f"use; remove boxes you no longer need (their leases are in {self.leases})"
        )

    def release(self, uid: int, root: Path) -> None:
        """Give back the uid of the box at `root`; its processes must be gone."""
        wanted = str(Path(root).absolute())
        if not self.leases.is_dir():
            return
        with self._locked():
            if self._leases().get(uid) != wanted:
                return  # not this box's (any more)
            if processes.uid_pids(uid):
                raise UidError(f"uid {uid} still runs processes; stop the box first")
            self._drop(uid)

    def _drop(self, uid: int) -> None:
        self.sweep(uid)
        (self.leases / str(uid)).unlink(missing_ok=True)

    def sweep(self, uid: int) -> None:
        """Remove what `uid` left at the top of the shared temporary directories."""
        for directory in self.temp_dirs:
            try:
                entries = list(os.scandir(directory))
            except OSError:
                continue
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != uid:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        shutil.rmtree(entry.path)  # fd-based: never follows a link
                    else:
                        os.unlink(entry.path)

    def _cursor(self) -> int:
        try:
            value = int((self.leases / CURSOR).read_text(encoding="utf-8").strip())
        except (OSError, ValueError):
            return self.first
        return value if self.first <= value < self.first + self.count else self.first


def _named(uid: int) -> bool:
    """True when the user or group database knows this id."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
        except KeyError:
            continue
        return True
    return False


def _subordinate_ids(first: int, count: int) -> set[int]:
    """Ids /etc/subuid and /etc/subgid hand out within `first` .. `first + count - 1`."""
    taken: set[int] = set()
    last = first + count
    for path in SUBID_FILES:
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.strip().split(":")
            if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
                continue
            start = int(parts[1])
            low, high = max(start, first), min(start + int(parts[2]), last)
            taken.update(range(low, high))
    return taken


POOL = UidPool()
