"""The nodes' files in memory: one tmpfs on `<home>/nodes`, under every node's directory
(its Docker data root, /etc/docker and log), when the machine has the memory to spare.

Loading an image into a node unpacks each of its layers into that node's data root: on a
disk file system most of that is the kernel creating files, once per node. Measured on a
2-core machine, `cluster.up --nodes 3` with the kit image loaded took 43 s and 74 CPU-s
on ext4, and 24 s and 38 CPU-s on tmpfs. What the nodes hold goes at `cluster.down`
either way.

The mount is the host's, so a node daemon stopped and started again (`cluster.restart`,
a dead daemon revived by `cluster.up`) finds its data as it left it. A reboot of the
machine loses it, as it loses the namespaces; `cluster.up` then sees the tmpfs gone and
builds the cluster again. With less than `MIN_AVAILABLE` of memory available, or when
asked (`cluster.up --disk`), the nodes stay on disk; `cluster.up` says which
(`Plan.line`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bandkit import tools
from bandkit.cluster.errors import ClusterError
from bandkit.cluster.network import mounted

MEMINFO = Path("/proc/meminfo")
GIB = 1 << 30
MIN_AVAILABLE = 4 * GIB  # three nodes with the kit image hold about 1.3 GiB
SHARE = 2  # the tmpfs may grow to 1/SHARE of the machine's memory (tmpfs's own default)
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Plan:
    """Where the nodes' files go: a tmpfs of at most `size` bytes, or (size 0) the disk."""

    size: int
    line: str

    @property
    def in_memory(self) -> bool:
        return self.size > 0


def _meminfo(meminfo: Path) -> dict[str, int]:
    """/proc/meminfo's `Name: N kB` lines, in bytes."""
    values: dict[str, int] = {}
    for row in meminfo.read_text(encoding="utf-8").splitlines():
        name, _, rest = row.partition(":")
        fields = rest.split()
        if fields and fields[0].isdigit():
            values[name] = int(fields[0]) * (1024 if fields[1:] == ["kB"] else 1)
    return values


def plan(meminfo: Path = MEMINFO, *, on_disk: bool = False) -> Plan:
    """A tmpfs when `MIN_AVAILABLE` is available now and `on_disk` is not asked; else the
    disk."""
    if on_disk:
        return Plan(0, "cluster.up: the nodes' Docker data on disk (--disk)")
    try:
        values = _meminfo(meminfo)
    except OSError:
        values = {}
    available, total = values.get("MemAvailable", 0), values.get("MemTotal", 0)
    if available < MIN_AVAILABLE or total <= 0:
        return Plan(
            0,
            f"cluster.up: the nodes' Docker data on disk ({available / GIB:.1f} GiB of memory "
            f"available, under the {MIN_AVAILABLE // GIB} GiB that keeps it in memory)",
        )
    size = total // SHARE
    return Plan(
        size,
        f"cluster.up: the nodes' Docker data in memory (tmpfs, up to {size / GIB:.1f} GiB; "
        "`cluster.down` frees it)",
    )


def mount(path: Path, size: int) -> None:
    """A private tmpfs of at most `size` bytes on `path` (made if missing); once only."""
    if path.is_symlink():
        raise ClusterError(f"{path} is a symbolic link: the cluster's files go in a directory")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if mounted(path):
        return
    tools.run(
        ["mount", "-t", "tmpfs", "-o", f"mode=0700,size={size}", "bandkit-cluster", str(path)],
        what=f"mount a tmpfs on {path}",
        timeout=TIMEOUT_S,
        error=ClusterError,
    )


def unmount(path: Path) -> None:
    """Undo `mount`; nothing mounted is done. Called once every node's daemon is gone: a
    mount some process still holds is detached (`--lazy`) and freed when it lets go."""
    while mounted(path):
        try:
            tools.run(["umount", str(path)], what=f"umount {path}", timeout=TIMEOUT_S)
        except tools.ToolError:
            tools.run(
                ["umount", "--lazy", str(path)],
                what=f"umount --lazy {path}",
                timeout=TIMEOUT_S,
                error=ClusterError,
            )
