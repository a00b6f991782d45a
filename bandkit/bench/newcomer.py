"""Newcomer benchmark: wall time of the short path as typed, `uv run invoke build push`.

- cold: `build --no-cache push` into a fresh run directory, so every kit layer is rebuilt
  (on the bases already present) and `push` starts an empty local registry and pushes
  every layer;
- first rebuild: `build push` right after; the classic builder does not take every layer
  a `--no-cache` build made as cache, so some steps run again and their layers are pushed;
- cached: `build push` once more, nothing changed (the registry reused, no layer sent).

Both include `uv run` and invoke's start, as the newcomer pays them; `build`'s own figure
is split out from its last line. The run directory is chosen through invoke's
environment configuration (`INVOKE_RUN_DIR`), so the user's registry and run state are
left alone; `dist/spec.yaml` is put back as it was. Making missing bases (`image.bases`,
debootstrap) is not part of it: they are made once per machine.
Then the walk to a replying agent, per runtime (local always; docker when a daemon
answers and the kit image exists): `platform.up`, `kit.provision` until "connected" (its
own figure from the task's last progress line, and the task's wall time), `kit.ping` five
times (the round trip each prints), `kit.unprovision`. Targets: connected in <= 3 s on
local and <= 5 s on docker with a warm uv cache.
Needs a Docker daemon for the build push part; without one it says so in one line.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from bandkit.bench import docker_ok, quick, sized
from bandkit.image import bases as image_bases
from bandkit.image import registry as image_registry
from bandkit.image.facts import REPO_ROOT, STARTER_DIR, host_arch
from bandkit.kit import build_push as shortcuts

SKIP = (
    "newcomer: skipped: no Docker daemon answers (`uv run invoke ci.prepare --lane docker_tests`)"
)
BUILT = re.compile(r"^build: built .* in (?P<seconds>\d+\.\d)s$", re.MULTILINE)
TIMEOUT_S = 1800.0


CONNECTED = re.compile(r"connected in (?P<seconds>\d+\.\d)s")
ANSWERED = re.compile(r"answered in (?P<ms>\d+) ms")
TARGET_CONNECT_S = {"local": 3.0, "docker": 5.0}


def run() -> list[str]:
    docker = docker_ok()
    lines = _build_push() if docker else [SKIP]
    runtimes = ["local"] + (["docker"] if docker else [])
    for runtime in runtimes:
        lines += _first_agent(runtime)
    return lines


def _build_push() -> list[str]:
    image_bases.ensure_bases((host_arch(),), progress=lambda _line: None)
    old_spec = shortcuts.DIST_SPEC.read_bytes() if shortcuts.DIST_SPEC.exists() else None
    with tempfile.TemporaryDirectory(prefix="bandkit-bench-newcomer-") as tmp:
        run_dir = Path(tmp) / "run"
        try:
            if quick():  # one build push on the cache as it is
                once = _timed(["build", "push"], run_dir)
                return [f"newcomer: build push (quick: one run, cache as it is) {_split(once)}"]
            cold = _timed(["build", "--no-cache", "push"], run_dir)
            rebuild = _timed(["build", "push"], run_dir)
            cached = _timed(["build", "push"], run_dir)
        finally:
            image_registry.stop_kept(run_dir / shortcuts.REGISTRY_FOLDER)
            if old_spec is None:
                shortcuts.DIST_SPEC.unlink(missing_ok=True)
            else:
                shortcuts.DIST_SPEC.write_bytes(old_spec)
    return [
        f"newcomer: build push cold {_split(cold)} (every kit layer rebuilt on present "
        "bases, an empty local registry started and filled)",
        f"newcomer: build push first rebuild after it {_split(rebuild)}",
        f"newcomer: build push cached {_split(cached)} (nothing changed, registry reused)",
    ]


def _invoke(verbs: list[str], run_dir: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "INVOKE_RUN_DIR": str(run_dir)}
    env.pop("BAND_REST_URL", None)
    start = time.monotonic()
    proc = subprocess.run(
        ["uv", "run", "invoke", *verbs],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=TIMEOUT_S,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"`invoke {' '.join(verbs)}` failed:\n{proc.stderr[-2000:]}")
    return time.monotonic() - start, proc


def _first_agent(runtime: str) -> list[str]:
    """platform.up, provision to connected, five pings, unprovision: the README's walk."""
    import shutil

    with tempfile.TemporaryDirectory(prefix="bandkit-bench-first-agent-") as tmp:
        Path(tmp).chmod(0o755)  # the agent uid reads the workspace in place
        run_dir, workspace = Path(tmp) / "run", Path(tmp) / "my-agent"
        shutil.copytree(STARTER_DIR, workspace)
        name = f"bench-{runtime}"
        _invoke(["platform.up"], run_dir)
        try:
            wall, proc = _invoke(
                [
                    "kit.provision",
                    f"--name={name}",
                    f"--workspace={workspace}",
                    "--description=the newcomer benchmark's echo agent",
                    f"--runtime={runtime}",
                ],
                run_dir,
            )
            connected = CONNECTED.search(proc.stderr)
            pings = []
            for _ in range(sized(5, 1)):
                _, pong = _invoke(["kit.ping", f"--name={name}"], run_dir)
                answered = ANSWERED.search(pong.stdout)
                pings.append(float(answered["ms"]) if answered else float("nan"))
        finally:
            _invoke(["kit.unprovision", f"--name={name}"], run_dir)
            _invoke(["platform.down"], run_dir)
    seconds = float(connected["seconds"]) if connected else float("nan")
    target = TARGET_CONNECT_S[runtime]
    pings.sort()
    return [
        f"newcomer: {runtime}: kit.provision to connected {seconds:.1f}s (target <= "
        f"{target:.0f}s: {'met' if seconds <= target else 'MISSED'}), task wall {wall:.1f}s",
        f"newcomer: {runtime}: kit.ping round trip p50 {pings[len(pings) // 2]:.0f} ms "
        f"(min {pings[0]:.0f}, max {pings[-1]:.0f}; includes the 0.2 s reply poll)",
    ]


def _split(timed: tuple[float, float]) -> str:
    wall, build = timed
    return f"{wall:.1f}s (build {build:.1f}s, push + start-up {wall - build:.1f}s)"


def _timed(verbs: list[str], run_dir: Path) -> tuple[float, float]:
    """(wall seconds of `uv run invoke <verbs>`, the build's own seconds)."""
    wall, proc = _invoke(verbs, run_dir)
    built = BUILT.search(proc.stdout)
    return wall, float(built["seconds"]) if built else float("nan")
