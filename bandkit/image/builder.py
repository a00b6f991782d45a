"""A side Docker daemon that builds several platforms in one `docker buildx build`.

Debian bookworm's Docker (20.10) has no buildx and no containerd image store, so its
BuildKit refuses multi-platform builds. This module runs a second, private daemon from
Debian trixie's packages (`docker.io` 26.1, `docker-buildx` 0.13, `containerd` 1.7),
fetched as .debs and unpacked into a private folder (nothing is installed system-wide),
with the containerd image store on. The main daemon is never stopped or reconfigured.

Isolation from the main daemon: its own `--data-root`, `--exec-root` (so its own managed
containerd, socket and state), `--pidfile`, socket `unix:///run/bandkit-buildx/docker.sock`,
cgroup parent, and its own bridge `bkbx0` with iptables, ip-forward and masquerading off.
Never `--bridge=none`: dockerd then deletes the host's `docker0` interface, which breaks
the main daemon's containers. Without NAT on `bkbx0`, builds use `--network=host`.

`up()` fetches (once) and starts the daemon unless it answers; `down()` stops it (its data,
the build cache, stays); `env()` is what selects it: `DOCKER_HOST` plus a `DOCKER_CONFIG`
whose `cli-plugins/` holds trixie's buildx. Privileged steps use `sudo -n` when not root.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bandkit import processes, tools
from bandkit.ci.privilege import as_root
from bandkit.dockercli import ImageError, docker_answers
from bandkit.image.bases import enable_emulation
from bandkit.image.builder_fetch import MARKER, SideDockerError, fetch_debs
from bandkit.image.facts import host_arch, state_home

__all__ = ["Layout", "SideDockerError", "down", "env", "status", "up"]

BRIDGE = "bkbx0"
RUN_TIMEOUT_S = 120.0  # each privileged step (ip, mkdir, kill)
BRIDGE_ADDRESS = "10.199.77.1/24"
RUN_DIR = Path("/run/bandkit-buildx")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
Progress = Callable[[str], None]


def default_home() -> Path:
    return state_home() / "sidedocker"


@dataclass(frozen=True)
class Layout:
    """Where the side daemon's files live (home: ours; run: the daemon's runtime state)."""

    home: Path
    run: Path = RUN_DIR

    @property
    def root(self) -> Path:  # the unpacked .debs
        return self.home / "root"

    @property
    def debs(self) -> Path:
        return self.home / "debs"

    @property
    def marker(self) -> Path:  # "<package> <version>" per line once unpacked
        return self.root / MARKER

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def config(self) -> Path:  # DOCKER_CONFIG: cli-plugins/docker-buildx
        return self.home / "config"

    @property
    def daemon_json(self) -> Path:
        return self.home / "daemon.json"

    @property
    def log(self) -> Path:
        return self.home / "dockerd.log"

    @property
    def pidfile(self) -> Path:
        return self.run / "dockerd.pid"

    @property
    def socket(self) -> Path:
        return self.run / "docker.sock"

    @property
    def host(self) -> str:
        return f"unix://{self.socket}"


def layout(home: Path | None = None) -> Layout:
    return Layout(home or default_home())


def env(where: Layout) -> dict[str, str]:
    """The environment that points the docker CLI (and buildx) at the side daemon."""
    return {"DOCKER_HOST": where.host, "DOCKER_CONFIG": str(where.config)}


def daemon_config() -> dict[str, object]:
    return {
        "features": {"containerd-snapshotter": True},
        "bridge": BRIDGE,
        "iptables": False,
        "ip6tables": False,
        "ip-forward": False,
        "ip-masq": False,
        "userland-proxy": False,
        "cgroup-parent": "bandkit-buildx",
    }


def _run(argv: Sequence[str], what: str) -> None:
    tools.run(argv, what=what, timeout=RUN_TIMEOUT_S, error=SideDockerError)


def _privileged(argv: Sequence[str]) -> list[str]:
    command = as_root(argv)
    if command is None:
        raise SideDockerError(f"{argv[0]} needs root; re-run as root")
    return command


def answers(where: Layout) -> bool:
    return where.socket.exists() and docker_answers(env={"DOCKER_HOST": where.host})


def pid(where: Layout) -> int | None:
    try:
        value = int(where.pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    return value if processes.alive(value) else None


def _ensure_bridge() -> bool:
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        return False
    for argv in (
        ["ip", "link", "add", "name", BRIDGE, "type", "bridge"],
        ["ip", "addr", "add", BRIDGE_ADDRESS, "dev", BRIDGE],
        ["ip", "link", "set", BRIDGE, "up"],
    ):
        _run(_privileged(argv), f"bridge {BRIDGE}")
    return True


def up(where: Layout, progress: Progress = print) -> list[str]:
    """Start the side daemon unless it answers; return what was done, one line each."""
    if answers(where):
        return [f"side dockerd: already running (pid {pid(where)}, {where.host})"]
    if shutil.which("docker") is None:
        raise SideDockerError("no docker CLI on PATH")
    lines = fetch_debs(where.debs, where.root, progress)
    plugins = where.config / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    link = plugins / "docker-buildx"
    link.unlink(missing_ok=True)
    link.symlink_to(where.root / "usr/libexec/docker/cli-plugins/docker-buildx")
    _run(_privileged(["mkdir", "-p", str(where.run)]), f"create {where.run}")
    if _ensure_bridge():
        lines.append(f"bridge {BRIDGE} {BRIDGE_ADDRESS}: created")
    lines.append(_emulation())
    config = daemon_config()
    if _group_exists("docker"):
        config["group"] = "docker"
    where.daemon_json.write_text(json.dumps(config, indent=2) + "\n")
    bins = [str(where.root / "usr/bin"), str(where.root / "usr/sbin")]
    argv = [
        "env",
        "PATH=" + os.pathsep.join([*bins, os.environ.get("PATH", "/usr/sbin:/usr/bin")]),
        str(where.root / "usr/sbin/dockerd"),
        f"--config-file={where.daemon_json}",
        f"--data-root={where.data}",
        f"--exec-root={where.run / 'exec'}",
        f"--pidfile={where.pidfile}",
        f"--host={where.host}",
    ]
    with where.log.open("ab") as log:
        subprocess.Popen(  # the daemon outlives this process by design; down() stops it
            _privileged(argv),
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    started = time.monotonic()
    while not answers(where):
        if time.monotonic() - started > START_TIMEOUT_S:
            tail = where.log.read_text(errors="replace").strip().splitlines()[-5:]
            raise SideDockerError(
                f"side dockerd did not answer within {START_TIMEOUT_S:.0f}s; "
                f"see {where.log}:\n" + "\n".join(tail)
            )
        time.sleep(0.2)
    lines.append(
        f"side dockerd: started (pid {pid(where)}, {where.host}) "
        f"in {time.monotonic() - started:.1f}s"
    )
    return lines


def _emulation() -> str:
    """Register qemu for the foreign arch before BuildKit probes its platforms (at start)."""
    foreign = "arm64" if host_arch() == "amd64" else "amd64"
    try:
        enable_emulation(foreign)
    except ImageError as exc:
        return f"{foreign} emulation: unavailable ({exc}); builds stay {host_arch()}-only"
    return f"{foreign} emulation: qemu registered"


def down(where: Layout) -> str:
    """Stop the side daemon (graceful SIGTERM); its data, build cache and bridge stay."""
    running = pid(where)
    if running is None:
        return "side dockerd: not running"
    _run(_privileged(["kill", "-TERM", str(running)]), f"stop dockerd pid {running}")
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while processes.alive(running):
        if time.monotonic() > deadline:
            raise SideDockerError(
                f"dockerd pid {running} still running after {STOP_TIMEOUT_S:.0f}s; see {where.log}"
            )
        time.sleep(0.2)
    return f"side dockerd: stopped (pid {running})"


def status(where: Layout) -> list[str]:
    running = answers(where)
    lines = [
        f"side dockerd: running (pid {pid(where)}, {where.host})"
        if running
        else f"side dockerd: stopped ({where.host})",
        f"home: {where.home}",
    ]
    if where.marker.is_file():
        lines.append("packages: " + where.marker.read_text().strip().replace("\n", ", "))
    return lines


def _group_exists(name: str) -> bool:
    try:
        grp.getgrnam(name)
    except KeyError:
        return False
    return True
