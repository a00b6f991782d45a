"""Prepare a machine for CI lanes: Debian packages, and a Docker daemon when a lane needs one.

Used by `invoke ci.prepare` from both `.ci/run` and the GitHub workflow, so the two
install the same things. Idempotent: installed packages are skipped, a daemon that
already answers is left alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from bandkit.ci.lanes import LANES, Lane, lane
from bandkit.ci.privilege import as_root
from bandkit.dockercli import docker_answers
from bandkit.errors import BandkitError

DOCKER_PACKAGES = ("docker.io",)
DOCKERD_LOG = Path("/var/log/bandkit-dockerd.log")
DOCKERD_START_TIMEOUT_S = 60.0
APT_TIMEOUT_S = 900.0


class PrepareError(BandkitError):
    """An expected failure while preparing the machine; the message says what to do."""


def packages_for(lanes: Iterable[Lane], *, have_docker: bool = False) -> list[str]:
    """Debian packages the lanes need; Docker's own only when no daemon answers yet.

    A machine that already runs a Docker (a GitHub runner's docker-ce, Docker Desktop) keeps
    it: installing Debian's docker.io beside docker-ce conflicts (containerd.io).
    """
    wanted: list[str] = []
    for entry in lanes:
        extra: tuple[str, ...] = DOCKER_PACKAGES if entry.docker and not have_docker else ()
        for pkg in (*entry.apt, *extra):
            if pkg not in wanted:
                wanted.append(pkg)
    return wanted


def _privileged(argv: Sequence[str]) -> list[str]:
    command = as_root(argv)
    if command is None:
        raise PrepareError(f"need root to run {argv[0]}; re-run as root or install sudo")
    return command


def _installed(pkg: str) -> bool:
    proc = subprocess.run(
        ["dpkg-query", "-W", "-f=${Status}", pkg],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    return proc.returncode == 0 and "install ok installed" in proc.stdout


def install_packages(packages: Sequence[str]) -> list[str]:
    """apt-get install what is missing; returns what was installed."""
    if shutil.which("dpkg-query") is None:
        raise PrepareError(
            "not a Debian/Ubuntu machine: install " + " ".join(packages) + " by hand"
        )
    missing = [p for p in packages if not _installed(p)]
    if not missing:
        return []
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing],
    ):
        proc = subprocess.run(
            _privileged(argv),
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=APT_TIMEOUT_S,
        )
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-10:])
            raise PrepareError(f"`{' '.join(argv[:2])}` failed (exit {proc.returncode}):\n{tail}")
    return missing


def ensure_dockerd(timeout_s: float = DOCKERD_START_TIMEOUT_S) -> bool:
    """Start dockerd in the background unless a daemon answers; True when we started it."""
    if docker_answers():
        return False
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise PrepareError("no dockerd binary: install docker.io (apt-get install docker.io)")
    log = DOCKERD_LOG.open("ab")
    subprocess.Popen(  # the daemon outlives this process by design
        _privileged([dockerd]), stdout=log, stderr=log, start_new_session=True
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if docker_answers():
            return True
        time.sleep(0.5)
    raise PrepareError(f"dockerd did not answer within {timeout_s:.0f}s; see {DOCKERD_LOG}")


def prepare(lane_ids: Sequence[str]) -> list[str]:
    """Install and start what the given lanes need ('all' = every lane). Returns log lines."""
    chosen = list(LANES) if "all" in lane_ids else [_find(lid) for lid in lane_ids]
    lines = []
    docker_lane = any(entry.docker for entry in chosen)
    wanted = packages_for(chosen, have_docker=docker_lane and docker_answers())
    installed = install_packages(wanted)
    lines.append(f"installed: {' '.join(installed)}" if installed else "packages: all present")
    if docker_lane:
        lines.append("dockerd: started" if ensure_dockerd() else "dockerd: already running")
    return lines


def _find(lane_id: str) -> Lane:
    try:
        return lane(lane_id)
    except KeyError as exc:
        raise PrepareError(str(exc.args[0])) from None
