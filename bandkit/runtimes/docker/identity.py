"""The agent's identity in a docker box: the image's uid 1000, with a gid of the box's own.

Without a user namespace a container's ids are the host's: the agent runs as host uid
1000, and any host process of uid 1000 could read its `/proc/<pid>/environ` (where the
credential proxy's per-box token is, in `BAND_REST_URL`), its memory, and its files
through `/proc/<pid>/root`. The kernel lets a process without CAP_SYS_PTRACE into another
one's `/proc` only when the real, effective and saved uid and gid all match. So every box
gets a primary gid of its own, drawn at random from `GID_RANGE` and checked against this
host (no group has it, no account's primary group is it, no `/etc/subgid` range holds
it, so no account can map it into a user namespace); the entrypoint drops to it
(`BAND_KIT_AGENT_GID`), and `exec` runs as `1000:<gid>` too. A host process cannot take
that gid: no group names it, and a setgid file of that group could come only from that
same box, whose token it holds anyway.

The gid is recorded (manifest, and the box's owner record for `exec`: `ownership.Box`)
before the container exists. An image whose entrypoint predates this (no `GID_LABEL`) is
refused: its agent would keep gid 1000. With user-namespace remapping or rootless Docker
the container's ids are not the host's in the first place, and a remapped range has no
room for a high gid: the agent keeps gid 1000 (`DEFAULT_GID`).
"""

from __future__ import annotations

import grp
import json
import pwd
import secrets
from collections.abc import Callable, Mapping
from pathlib import Path

from bandkit.dockercli import BUILD_COMMAND
from bandkit.runtimes.base import SandboxError
from bandkit.runtimes.docker.engine import Engine

GID_ENV = "BAND_KIT_AGENT_GID"  # read by the image's entrypoint
GID_LABEL = "ai.band.kit.entrypoint.agent-gid"  # the image's entrypoint honours GID_ENV
DEFAULT_GID = 1000  # the image's own `agent` group
# Far above any account (1000-59999), Debian's and systemd's reserved ranges (60000-65535)
# and the subordinate ranges tools hand out from 100000 on (each is checked anyway).
GID_RANGE = (1 << 28, 1 << 30)
SUBGID = Path("/etc/subgid")
_TRIES = 64


def host_has_gid(gid: int, subgid: Path = SUBGID) -> bool:
    """Whether an account on this host has, or could take, `gid`: a group of that id, an
    account whose primary group it is, or a subordinate range (/etc/subgid) holding it."""
    try:
        grp.getgrgid(gid)
        return True
    except KeyError:
        pass
    if any(entry.pw_gid == gid for entry in pwd.getpwall()):
        return True
    try:
        lines = subgid.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return False
    for line in lines:
        _, start, count = [*line.split(":"), "", ""][:3]  # name:start:count
        if start.isdigit() and count.isdigit() and int(start) <= gid < int(start) + int(count):
            return True
    return False


def draw_gid(taken: Callable[[int], bool] = host_has_gid) -> int:
    """A random gid in GID_RANGE that no host account has or can take."""
    low, high = GID_RANGE
    for _ in range(_TRIES):
        gid = low + secrets.randbelow(high - low)
        if not taken(gid):
            return gid
    raise SandboxError(
        f"docker: found no gid in {low}-{high - 1} that no host account uses; "
        "check /etc/group and /etc/subgid"
    )


def remapped(security_options: list[str]) -> bool:
    """User-namespace remapping or rootless Docker: container ids are not the host's."""
    names = {
        part.removeprefix("name=")
        for option in security_options
        for part in option.split(",")
        if part.startswith("name=")
    }
    return bool(names & {"userns", "rootless"})


def image_labels(engine: Engine, image: str) -> Mapping[str, str] | None:
    """The image's labels; None when the image is missing."""
    result = engine.run(
        "image",
        "inspect",
        "--format",
        "{{json .Config.Labels}}",
        image,
        what="image inspect",
        check=False,
    )
    if result.returncode:
        return None
    try:
        labels = json.loads(result.stdout.strip() or "null")
    except ValueError:
        labels = None
    return labels if isinstance(labels, dict) else {}


def agent_gid(engine: Engine, image: str, labels: Mapping[str, str]) -> int:
    """The gid the new box's agent runs as (see the module docstring); SandboxError
    for an image whose entrypoint would ignore it."""
    info = engine.run("info", "--format", "{{json .SecurityOptions}}", what="info", check=False)
    try:
        options = json.loads(info.stdout.strip() or "[]") if info.returncode == 0 else None
    except ValueError:
        options = None
    if not isinstance(options, list):
        detail = (info.stderr or info.stdout).strip()[-300:]
        raise SandboxError(f"docker: cannot read the daemon's security options: {detail}")
    if remapped([str(o) for o in options]):
        return DEFAULT_GID
    if labels.get(GID_LABEL) != "1":
        raise SandboxError(
            f"docker: image {image} predates per-box agent gids (no {GID_LABEL} label): "
            "its agent would run as gid 1000, whose /proc any host process of uid 1000 "
            f"can read; rebuild it: `{BUILD_COMMAND}`"
        )
    return draw_gid()
