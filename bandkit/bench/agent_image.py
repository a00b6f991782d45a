"""Agent image benchmark (`nox -s bench -- agent_image`, a Docker daemon and the kit image).

For the echo-agent starter copied into a scratch workspace: the launcher's sync phase at a
container's start (what stands between `docker start` and the agent's first line), from
the kit image (`uv sync` from PyPI into an empty venv) against the workspace's agent image
(`kit.build-agent`: the venv already in it), each timed from `docker run` to the phase's
end, with the bytes the container received meanwhile (its eth0 counter) beside it; and the
agent image's build, first and again (found by its inputs' digest). Target: the agent
image's start downloads nothing (< 1 MB received: DNS and nothing else) and is faster.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Final

from bandkit.bench import docker_ok, sized
from bandkit.image.facts import STARTER_DIR

ROUNDS: Final = 3
TARGET_RX_BYTES: Final = 1_000_000
SYNC_AND_COUNT = (
    "/opt/band/venv/bin/python -m launcher.prebuild >/dev/null 2>&1 && "
    "cat /sys/class/net/eth0/statistics/rx_bytes"
)


def _start(image: str, workspace: Path) -> tuple[float, int]:
    from bandkit.dockercli import docker
    from bandkit.image import agent

    options, variables = agent.sync_argv(workspace, agent.host_bundle())
    argv = ["run", "--rm", *options, image, *variables]
    argv += ["/usr/local/bin/band-entrypoint.sh", "sh", "-c", SYNC_AND_COUNT]
    began = time.monotonic()
    done = docker(argv, 900)
    return time.monotonic() - began, int(done.stdout.strip().splitlines()[-1])


def run() -> list[str]:
    from bandkit.dockercli import docker, image_exists
    from bandkit.image import agent
    from bandkit.image.facts import LOCAL_TAG

    if not docker_ok() or not image_exists(LOCAL_TAG):
        return [f"agent_image: skipped (needs a Docker daemon and {LOCAL_TAG})"]
    scratch = Path(tempfile.mkdtemp(prefix="bench-agent-image-"))
    scratch.chmod(0o755)
    workspace = scratch / "echo"
    shutil.copytree(STARTER_DIR, workspace, ignore=shutil.ignore_patterns(".venv", "__pycache__"))
    tag = ""
    try:
        built = agent.build(workspace, progress=lambda _line: None)
        tag = built.tag
        again = agent.build(workspace, progress=lambda _line: None)
        rounds = sized(ROUNDS, 1)
        kit = [_start(LOCAL_TAG, workspace) for _ in range(rounds)]
        imaged = [_start(tag, workspace) for _ in range(rounds)]
    finally:
        if tag:
            docker(["image", "rm", tag], 120, check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    kit_s, kit_rx = min(kit)[0], max(rx for _, rx in kit)
    img_s, img_rx = min(imaged)[0], max(rx for _, rx in imaged)
    verdict = "within" if img_rx < TARGET_RX_BYTES and img_s < kit_s else "OVER"
    return [
        f"agent image of the echo starter: built in {built.seconds:.1f} s "
        f"({built.size_bytes / 1e6:.0f} MB), found again in {again.seconds:.2f} s",
        f"  start -> sync phase done, best of {rounds}: kit image {kit_s:.1f} s, "
        f"{kit_rx / 1e6:.1f} MB received; agent image {img_s:.1f} s, {img_rx / 1e6:.2f} MB "
        f"received ({kit_s / img_s:.1f}x faster; {verdict} the target: < 1 MB and faster)",
    ]
