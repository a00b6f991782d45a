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
Needs a Docker daemon; without one it prints a single skip line.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from bandkit.dockercli import docker_answers
from bandkit.image import bases as image_bases
from bandkit.image import registry as image_registry
from bandkit.image.facts import REPO_ROOT, host_arch
from bandkit.kit import build_push as shortcuts

SKIP = (
    "newcomer: skipped: no Docker daemon answers (`uv run invoke ci.prepare --lane docker_tests`)"
)
BUILT = re.compile(r"^build: built .* in (?P<seconds>\d+\.\d)s$", re.MULTILINE)
TIMEOUT_S = 1800.0


def run() -> list[str]:
    if not docker_answers():
        return [SKIP]
    image_bases.ensure_bases((host_arch(),), progress=lambda _line: None)
    old_spec = shortcuts.DIST_SPEC.read_bytes() if shortcuts.DIST_SPEC.exists() else None
    with tempfile.TemporaryDirectory(prefix="bandkit-bench-newcomer-") as tmp:
        run_dir = Path(tmp) / "run"
        try:
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


def _split(timed: tuple[float, float]) -> str:
    wall, build = timed
    return f"{wall:.1f}s (build {build:.1f}s, push + start-up {wall - build:.1f}s)"


def _timed(verbs: list[str], run_dir: Path) -> tuple[float, float]:
    """(wall seconds of `uv run invoke <verbs>`, the build's own seconds)."""
    env = {**os.environ, "INVOKE_RUN_DIR": str(run_dir)}
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
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"`invoke {' '.join(verbs)}` failed:\n{proc.stderr[-2000:]}")
    built = BUILT.search(proc.stdout)
    return wall, float(built["seconds"]) if built else float("nan")
