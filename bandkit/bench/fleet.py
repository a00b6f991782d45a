"""Fleet benchmark (`nox -s bench -- fleet`): `fleet.render --target kubernetes` of a
fleet of 100 echo agents (load and validate the file, write the kustomize base), best of
3, against the 2 s target; and `kubectl kustomize` of the result, when the kubectl wheel
is installed (the dev group). The converge loop's figures on the local cluster
(`fleet.up` of 30 agents, a no-op `fleet.up`, `fleet.rollout --parallel 5` and the
messages it lost) are the `swarm` benchmark's: `nox -s bench -- swarm`."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from bandkit.bench import sized
from bandkit.image.facts import STARTER_DIR

AGENTS: Final = 100
ROUNDS: Final = 3
TARGET_RENDER_S: Final = 2.0


def run() -> list[str]:
    from bandkit.fleet import load, render

    count = sized(AGENTS, 10)
    with tempfile.TemporaryDirectory(prefix="bench-fleet-") as raw:
        root = Path(raw)
        shutil.copytree(STARTER_DIR, root / "ws", ignore=shutil.ignore_patterns(".venv"))
        agents = "".join(
            f"  - name: echo-{i}\n    description: echo agent {i} of the bench fleet\n"
            "    workspace: ws\n"
            for i in range(count)
        )
        (root / "fleet.yaml").write_text(f"version: 1\nagents:\n{agents}", encoding="utf-8")
        times = []
        for index in range(sized(ROUNDS, 1)):
            began = time.monotonic()
            render(load(root / "fleet.yaml"), root / f"out-{index}")
            times.append(time.monotonic() - began)
        best = min(times)
        mark = "within" if best <= TARGET_RENDER_S else "OVER"
        lines = [
            f"fleet.render --target kubernetes of {count} agents: {best:.2f} s best of "
            f"{len(times)} ({mark} the {TARGET_RENDER_S:g} s target)"
        ]
        kubectl = Path(sys.executable).with_name("kubectl")
        if kubectl.is_file():
            began = time.monotonic()
            done = subprocess.run(
                [str(kubectl), "kustomize", str(root / "out-0")],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            spent = time.monotonic() - began
            state = "built" if done.returncode == 0 else f"FAILED: {done.stderr.strip()[:200]}"
            lines.append(f"  kubectl kustomize of the base: {spent:.2f} s ({state})")
        else:
            lines.append("  kubectl kustomize: skipped (no kubectl beside this Python)")
    return lines
