"""What a newcomer needs next, after the tools: one line per check, the fix in the line.

`next_steps(host)` reads the machine through `Host` (every probe is a seam, so each line
can be tested with the probes stubbed) and returns one `Step` per check:

- **runtime auto**: which runtime `--runtime auto` picks and why (sbx on PATH, else a
  Docker daemon that answers, else local), and what `demo.up` and the smoke pick (a
  docker without the kit image falls back to local);
- **kit image**: is `band-python-kit:local` built (the docker runtime runs it);
- **local bases**: are the offline bases there (`image.bases`; only for builds that cannot
  pull the official ones);
- **iptables**: does it work (docker custody fails closed without its host firewall);
- **platform**: is a local platform running in the run directory (`.run/platform.json`);
- **run directory**: can the agent uid use it (as root the agent runs as uid 1000);
- **checkout**: can the agent uid read workspaces in this checkout (as root).

A step's state is `ok`, `todo` (a feature waits for the fix; the default path runs),
`n/a`, or `BLOCKS`: the default path, `uv run invoke demo.up` offline on the best runtime,
would fail. `blocking(steps)` lists those; the task exits 1 when there is any.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from bandkit import tools
from bandkit.dockercli import docker_answers, image_exists
from bandkit.emulator import service
from bandkit.fsio import closed_to_others, may_write
from bandkit.image import bases
from bandkit.image.facts import LOCAL_TAG, host_arch
from bandkit.runtimes import hostguard
from bandkit.runtimes.base import RuntimeName
from bandkit.runtimes.local import BOXES_HOME
from bandkit.runtimes.sdk_home import BASE_PYTHON
from bandkit.runtimes.select import AUTO, resolve_name

OK: Final = "ok"
TODO: Final = "todo"
NA: Final = "n/a"
BLOCKS: Final = "BLOCKS"
AGENT_UID: Final = 1000  # the launcher's agent uid (launcher.constants), as root
IPTABLES_TIMEOUT_S: Final = 10.0


@dataclass(frozen=True)
class Step:
    name: str
    state: str
    detail: str
    fix: str = ""

    def line(self, width: int = 0) -> str:
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{self.name + ':':<{width + 1}} {self.state:<6} {self.detail}{fix}"


def _iptables() -> tuple[bool, str]:
    """`iptables -S INPUT` (read only): does the host firewall's tool work here?"""
    binary = hostguard.Tools.find().iptables
    argv = [binary, *hostguard.WAIT, "-S", "INPUT"]
    try:
        done = tools.run(argv, what=binary, timeout=IPTABLES_TIMEOUT_S, check=False)
    except tools.ToolError as exc:
        if exc.returncode == tools.TIMED_OUT:
            return False, f"`{binary} -S INPUT` timed out"
        return False, f"{binary} is not installed"
    if done.returncode != 0:
        why = (done.stderr or done.stdout).strip().splitlines()
        return False, f"`{binary} -S INPUT` failed ({why[0][:120] if why else done.returncode})"
    return True, f"{binary} works"


def _mode(path: Path) -> str:
    try:
        return f"{stat.S_IMODE(path.stat().st_mode):o}"
    except OSError:
        return "?"


@dataclass(frozen=True)
class Host:
    """The probes, each a seam (tests stub them)."""

    run_dir: Path
    repo: Path
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    euid: Callable[[], int] = os.geteuid
    which: Callable[[str], str | None] = shutil.which
    docker: Callable[[], bool] = docker_answers
    image: Callable[[str], bool] = image_exists
    iptables: Callable[[], tuple[bool, str]] = _iptables
    platform: Callable[[Path], service.RunRecord | None] = service.running
    unreachable: Callable[[Path], list[Path]] = closed_to_others
    writable: Callable[[Path], bool] = may_write
    base_python: Path = BASE_PYTHON


def next_steps(host: Host) -> list[Step]:
    has_sbx = host.which("sbx") is not None
    docker = host.docker()
    kit = host.image(LOCAL_TAG) if docker else False
    steps = [
        _runtime(host, has_sbx=has_sbx, docker=docker, kit=kit),
        _kit_image(docker=docker, kit=kit),
        _bases(host, docker=docker),
        _firewall(host, docker=docker, demo_on_docker=docker and kit and not has_sbx),
        _platform(host),
        _run_dir(host),
    ]
    if host.euid() == 0:
        steps.append(_checkout(host))
    return steps


def blocking(steps: list[Step]) -> list[str]:
    return [step.name for step in steps if step.state == BLOCKS]


def render(steps: list[Step]) -> str:
    width = max(len(step.name) for step in steps)
    return "\n".join(step.line(width) for step in steps)


def _runtime(host: Host, *, has_sbx: bool, docker: bool, kit: bool) -> Step:
    name = resolve_name(AUTO, has_sbx=lambda: has_sbx, has_docker=lambda: docker)
    if name is RuntimeName.SBX:
        return Step(
            "runtime auto",
            OK,
            "sbx (sbx is on PATH): real Docker Sandboxes; the stub and real demo brains use "
            "docker or local instead",
            "`sbx policy init balanced` once, if not done yet",
        )
    if name is RuntimeName.DOCKER and kit:
        return Step(
            "runtime auto",
            OK,
            "docker (a daemon answers, no sbx on PATH; the kit image is built): isolated "
            "containers for demo.up, smoke.run and kit.provision",
        )
    root = host.euid() == 0
    if root and (host.which("setpriv") is None or not host.base_python.is_file()):
        missing = "setpriv" if host.which("setpriv") is None else str(host.base_python)
        return Step(
            "runtime auto",
            BLOCKS,
            f"local, and as root it runs agents as uid {AGENT_UID}, which needs {missing}",
            "`apt-get install util-linux python3` (setpriv, /usr/bin/python3)",
        )
    why = "no sbx, no Docker daemon" if not docker else "no sbx; docker answers"
    if name is RuntimeName.DOCKER:  # a daemon, but no kit image: the demo and smoke go local
        return Step(
            "runtime auto",
            OK,
            f"docker for kit.provision ({why}); demo.up and smoke.run take local, since "
            f"{LOCAL_TAG} is not built (host processes, no isolation)",
            "`uv run invoke build` for isolated containers",
        )
    return Step(
        "runtime auto",
        OK,
        f"local ({why}): agents run as host processes, no isolation",
        "for isolation, a Docker daemon (`uv run invoke ci.prepare --lane docker_tests`, "
        "as root) and `uv run invoke build`, or sbx",
    )


def _kit_image(*, docker: bool, kit: bool) -> Step:
    if not docker:
        return Step("kit image", NA, "no Docker daemon answers (the docker runtime is out)")
    if kit:
        return Step("kit image", OK, f"{LOCAL_TAG} is built: docker sandboxes can run")
    return Step(
        "kit image",
        TODO,
        f"{LOCAL_TAG} is not built: the docker runtime has nothing to run",
        "`uv run invoke build`",
    )


def _bases(host: Host, *, docker: bool) -> Step:
    if not docker:
        return Step("local bases", NA, "no Docker daemon answers")
    wanted = [base.tag for base in bases.planned((host_arch(),))]
    missing = [tag for tag in wanted if not host.image(tag)]
    if not missing:
        return Step("local bases", OK, f"{', '.join(wanted)} present (offline builds work)")
    return Step(
        "local bases",
        TODO,
        f"{', '.join(missing)} missing: needed only when the official bases cannot be "
        "pulled (offline builds)",
        "`uv run invoke image.bases`",
    )


def _firewall(host: Host, *, docker: bool, demo_on_docker: bool) -> Step:
    if not hostguard.wanted(dict(host.environ)):
        return Step(
            "iptables",
            TODO,
            f"off ({hostguard.OPT_OUT_ENV}=off): docker sandboxes can reach every service "
            "listening on this host",
            f"unset {hostguard.OPT_OUT_ENV} (needs a working iptables, as root)",
        )
    if not docker:
        return Step("iptables", NA, "no Docker daemon answers (only docker sandboxes use it)")
    works, detail = host.iptables()
    if works:
        return Step("iptables", OK, f"{detail}: docker sandboxes get their host firewall")
    state = BLOCKS if demo_on_docker else TODO
    cost = "demo.up on docker" if demo_on_docker else "every docker sandbox"
    return Step(
        "iptables",
        state,
        f"{detail}: {cost} fails closed (no host firewall, no sandbox)",
        "`apt-get install iptables` and run as root; or pass --runtime local; or "
        f"{hostguard.OPT_OUT_ENV}=off (warned: sandboxes then reach host services)",
    )


def _platform(host: Host) -> Step:
    shown = host.run_dir / service.RUN_FILE
    try:
        record = host.platform(host.run_dir)
    except service.PlatformError as exc:
        return Step(
            "platform",
            BLOCKS,
            str(exc),
            f"`uv run invoke platform.up` (or `uv run invoke platform.down` to clear {shown})",
        )
    if record is None:
        return Step(
            "platform",
            TODO,
            f"no local platform runs ({shown}): kit.* need one; demo.up starts its own",
            "`uv run invoke platform.up`",
        )
    return Step(
        "platform",
        OK,
        f"running at {record.rest_url} (pid {record.pid}); `uv run invoke platform.status` "
        "prints a login link for the room pages",
    )


def _run_dir(host: Host) -> Step:
    run_dir = host.run_dir
    if not host.writable(run_dir):
        return Step(
            "run directory",
            BLOCKS,
            f"{run_dir} cannot be made or written by this user",
            "fix its permissions, or pass --run-dir DIR (or set run_dir in invoke.yaml)",
        )
    if host.euid() != 0:
        return Step("run directory", OK, f"{run_dir}: usable; the agents run as you")
    bad = host.unreachable(run_dir)
    if not bad:
        return Step(
            "run directory",
            OK,
            f"{run_dir}: the agent uid {AGENT_UID} can traverse it; local boxes live inside",
        )
    why = " (private: platform.up keeps its key there)" if bad[0] == run_dir.absolute() else ""
    return Step(
        "run directory",
        OK,
        f"{bad[0]} is {_mode(bad[0])}{why}, which the agent uid {AGENT_UID} cannot enter: "
        f"kit.* and smoke.run keep local boxes in {BOXES_HOME} instead, the demo its own box root",
    )


def _checkout(host: Host) -> Step:
    bad = host.unreachable(host.repo)
    if not bad:
        return Step(
            "checkout",
            OK,
            f"{host.repo}: the agent uid {AGENT_UID} can read workspaces here",
        )
    return Step(
        "checkout",
        OK,
        f"the agent uid {AGENT_UID} cannot enter {bad[0]} (mode {_mode(bad[0])}): a local "
        "box gets a copy of a workspace here (the README's my-agent), staged at each start, "
        "so an edit reaches the box when it starts again; docker mounts it in place",
        f"to let local boxes read it in place, `chmod o+x {bad[0]}` or clone under a "
        "directory others can enter",
    )
