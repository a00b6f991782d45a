"""Preflight: one PASS/FAIL line per precondition, never a value (no URL, key or path).

Checks for every run: uv and the SDK are installed, the smoke agent's workspace is
complete, the run directory can be made and written (a private one is fine: as root the
local runtime keeps the box outside it and stages the workspace), the runtime is
usable (docker: also the kit image is built and the daemon drill can restart the
Docker daemon). Then, by platform:

- staging (`BAND_REST_URL` set): BAND_REST_URL and BAND_WS_URL set and not the SDK's
  production endpoints, BAND_API_KEY_USER set;
- local (otherwise): the kit's emulator can be imported (the smoke starts its own).

Exit 0 when every line is PASS, else 1 (`ok`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bandkit.errors import BandkitError
from bandkit.fsio import may_write
from smoke.context import AGENT_SRC
from smoke.target import REST_URL_ENV, USER_KEY_ENV, WS_URL_ENV, TargetError, guard


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    fix: str = ""  # what to do when it fails; never a value

    def line(self) -> str:
        return f"PASS  {self.name}" if self.ok else f"FAIL  {self.name}: {self.fix}"


# What a check's probe raises when its precondition does not hold: our own clear errors
# (no uv, a daemon the drill cannot restart), a missing binary or file, a missing
# package, a command past its timeout.
_NOT_MET = (BandkitError, OSError, ImportError, subprocess.SubprocessError)


def _safe(test: Callable[[], bool]) -> bool:
    """The probe's answer, False when it raises one of `_NOT_MET` (the line names the
    fix); anything else is a bug in the probe and surfaces with its traceback."""
    try:
        return test()
    except _NOT_MET:
        return False


def _uv() -> bool:
    from bandkit.runtimes.hostbox import find_uv

    find_uv()
    return True


def _sdk() -> bool:
    from importlib import metadata

    return bool(metadata.version("band-sdk"))


def _watchdog() -> bool:
    from smoke.drills import sdk_watchdog

    interval, threshold = sdk_watchdog()
    return 0 < interval < threshold


def _agent_workspace() -> bool:
    return all((AGENT_SRC / name).is_file() for name in ("band.yaml", "main.py", "uv.lock"))


def _emulator() -> bool:
    from bandkit.emulator import service

    return bool(service.MODULE)


def _not_production() -> bool:
    try:
        guard(os.environ.get(REST_URL_ENV, ""), os.environ.get(WS_URL_ENV, ""))
    except TargetError:
        return False
    return True


def _runtime(runtime: str) -> Check:
    if runtime in ("local", "auto"):
        ok = os.geteuid() != 0 or shutil.which("setpriv") is not None
        return Check("local runtime usable", ok, "as root it needs setpriv (util-linux)")
    if runtime == "sbx":
        return Check("sbx installed", shutil.which("sbx") is not None, "install Docker Sandboxes")
    if runtime == "docker":
        from bandkit.dockercli import docker_answers

        return Check("docker daemon answers", _safe(docker_answers), "start the Docker daemon")
    return Check("runtime known", False, "choose auto, local, docker or sbx")


def _docker_extra(runtime: str) -> list[Check]:
    """For the automated docker drills: the kit image, a daemon the drill can restart."""
    if runtime != "docker":
        return []
    from bandkit.ci import dockerd
    from bandkit.dockercli import image_exists
    from bandkit.runtimes.docker import DEFAULT_IMAGE

    return [
        Check(
            "kit image built",
            _safe(lambda: image_exists(DEFAULT_IMAGE)),
            "run `uv run invoke build` (or pass --image to smoke.run)",
        ),
        Check(
            "Docker daemon restartable by the daemon drill",
            _safe(lambda: bool(dockerd.find())),
            "needs root (or sudo -n) and the host's rootful dockerd, started by systemd or "
            "`uv run invoke ci.prepare`",
        ),
    ]


def checks(run_dir: Path, *, runtime: str = "local") -> list[Check]:
    found = [
        Check("uv installed", _safe(_uv), "install uv"),
        Check("band-sdk installed", _safe(_sdk), "run `uv sync`"),
        Check("SDK heartbeat watchdog readable", _safe(_watchdog), "run `uv sync`"),
        Check("smoke agent workspace complete", _agent_workspace(), "restore smoke/agent"),
        Check(
            "run directory writable",
            may_write(Path(run_dir)),
            "fix its permissions, or pass --run-dir DIR (or set run_dir in invoke.yaml)",
        ),
        _runtime(runtime),
        *_docker_extra(runtime),
    ]
    if os.environ.get(REST_URL_ENV):
        found += [
            Check(f"{WS_URL_ENV} set", bool(os.environ.get(WS_URL_ENV)), f"export {WS_URL_ENV}"),
            Check(
                "endpoints are not the SDK's production endpoints",
                _not_production(),
                "point BAND_REST_URL and BAND_WS_URL at staging",
            ),
            Check(f"{USER_KEY_ENV} set", bool(os.environ.get(USER_KEY_ENV)), "export it"),
        ]
    else:
        found.append(Check("local platform available", _safe(_emulator), "run `uv sync`"))
    return found


def ok(found: list[Check]) -> bool:
    return all(check.ok for check in found)
