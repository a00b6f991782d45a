"""The cluster's network: a hub namespace holding a bridge, one namespace per node joined
to it by a veth pair. Every address lives only inside these namespaces: the hub has no
route out and nothing is added to the host's own namespace, so no node reaches the host
or anything beyond it.

Each function is idempotent (an existing piece is kept, an absent one on removal is
success) and runs `ip` with an argv and a timeout, never a shell.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from bandkit import tools
from bandkit.cluster.errors import ClusterError
from bandkit.cluster.layout import BRIDGE, HUB_ADDRESS, HUB_NETNS, NETNS_DIR, PREFIX_LEN, Node

IP_TIMEOUT_S = 30.0


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return tools.run(
        ["ip", *args],
        what=f"ip {' '.join(args[:3])}",
        timeout=IP_TIMEOUT_S,
        check=check,
        error=ClusterError,
    )


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def netns_inode(name: str) -> int | None:
    """The inode of the namespace `ip netns` pinned as `name` (what /proc/PID/ns/net of
    its members points at), or None when it is absent."""
    try:
        return os.stat(NETNS_DIR / name).st_ino
    except OSError:
        return None


def add_netns(name: str) -> None:
    if not netns_exists(name):
        _ip("netns", "add", name)
    _ip("-n", name, "link", "set", "lo", "up")


def delete_netns(name: str) -> None:
    """Delete the namespace: its interfaces go with it (a veth's peer, the bridge)."""
    if netns_exists(name):
        _ip("netns", "delete", name)


def _link_exists(netns: str, link: str) -> bool:
    return _ip("-n", netns, "link", "show", link, check=False).returncode == 0


def add_hub() -> None:
    add_netns(HUB_NETNS)
    if not _link_exists(HUB_NETNS, BRIDGE):
        _ip("-n", HUB_NETNS, "link", "add", BRIDGE, "type", "bridge")
        _ip("-n", HUB_NETNS, "address", "add", f"{HUB_ADDRESS}/{PREFIX_LEN}", "dev", BRIDGE)
    _ip("-n", HUB_NETNS, "link", "set", BRIDGE, "up")


def join(node: Node) -> None:
    """Join `node`'s namespace to the hub: a veth pair, eth0 on its side, its address and
    a default route via the hub."""
    if not _link_exists(HUB_NETNS, node.veth):
        _ip(
            "link",
            "add",
            node.veth,
            "netns",
            HUB_NETNS,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            node.netns,
        )
        _ip("-n", node.netns, "address", "add", f"{node.address}/{PREFIX_LEN}", "dev", "eth0")
    _ip("-n", HUB_NETNS, "link", "set", node.veth, "master", BRIDGE, "up")
    _ip("-n", node.netns, "link", "set", "eth0", "up")
    _ip("-n", node.netns, "route", "replace", "default", "via", HUB_ADDRESS)


def remove_veth(name: str) -> None:
    if netns_exists(HUB_NETNS) and _link_exists(HUB_NETNS, name):
        _ip("-n", HUB_NETNS, "link", "delete", name)


def netns_dir_unused() -> bool:
    """True when `ip netns` holds no name any more (ours or anyone's)."""
    try:
        return not any(NETNS_DIR.iterdir())
    except FileNotFoundError:
        return False


def mounted(path: Path, mountinfo: Path = Path("/proc/self/mountinfo")) -> bool:
    """True when something is mounted on `path`. Read from the mount table, not
    `os.path.ismount`: that compares devices, and a directory bound onto itself (what
    `ip netns add` does to /run/netns) is on the same device as its parent."""
    target = str(path)
    for line in mountinfo.read_text(encoding="utf-8").splitlines():
        fields = line.split(" ")
        if len(fields) > 4 and _unescape(fields[4]) == target:
            return True
    return False


def _unescape(field: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def release_netns_dir() -> None:
    """Unmount and remove `/run/netns` (which the first `ip netns add` made) when no name is
    left in it; a directory someone else uses is kept."""
    if not netns_dir_unused():
        return
    while mounted(NETNS_DIR):  # `ip netns` binds it onto itself; undo every layer
        tools.run(
            ["umount", str(NETNS_DIR)],
            what="umount /run/netns",
            timeout=IP_TIMEOUT_S,
            error=ClusterError,
        )
    Path(NETNS_DIR).rmdir()
