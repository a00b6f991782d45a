"""Demo benchmark: `invoke demo.up --scenario happy` on the local runtime, as a user runs it.

Each round is a fresh `python -m invoke demo.up --platform local --runtime local
--headless` process in one scratch run directory: the demo starts its own emulator,
provisions the three agents, runs them through the kit launcher and tears it all down.
Timed from the host: command -> verdict (the `VERDICT:` transcript line appears) and
verdict -> clean teardown (the process exits 0; `DEMO_GRACE_S=0`, so this is the
closer plus the teardown). The first round is cold (a new uv cache, and as root a new
SDK home); the rest reuse the caches. Targets: verdict <= 30 s, teardown <= 10 s. The
upstream demo needs sbx, Docker and LLM keys, so there is nothing to compare here.

Then the same on the docker runtime (`--runtime docker`, the kit image
`band-python-kit:local` already built: a warm image), when a daemon answers and that
image exists (else one line says why it was skipped): one warm-up round, then
`DOCKER_ROUNDS` timed ones. Targets: verdict <= 60 s, teardown <= 10 s.

Quick mode runs one part only: docker when Docker is there, else local (the test lanes
run it both ways, so each part is proved once).
"""

from __future__ import annotations

import statistics
from typing import Final

from bandkit.bench import docker_ok, quick, sized
from bandkit.bench.demo_rounds import scratch_run, timed_round, why_failed

WARM_ROUNDS: Final = 3
TARGET_VERDICT_S: Final = 30.0
TARGET_TEARDOWN_S: Final = 10.0
DOCKER_ROUNDS: Final = 3
TARGET_DOCKER_VERDICT_S: Final = 60.0


def run(options: list[str] | None = None) -> list[str]:
    if options:  # `demo --brains stub`: the framework brains (`demo_stub`)
        from bandkit.bench import demo_stub

        return demo_stub.run(options)
    if quick() and docker_ok():
        return [
            "demo happy on the local runtime: skipped in quick mode with Docker",
            *docker_lines(),
        ]
    with scratch_run("bench-demo-") as run_dir:
        cold = timed_round(run_dir)
        warm = [timed_round(run_dir) for _ in range(sized(WARM_ROUNDS, 1))]
    verdict = statistics.median(v for v, _ in warm)
    teardown = statistics.median(t for _, t in warm)

    def mark(value: float, target: float) -> str:
        return "within" if value <= target else "OVER"

    return [
        "demo happy on the local runtime (own emulator, 3 agents via the kit launcher, "
        "DEMO_GRACE_S=0):",
        f"  cold: command -> verdict {cold[0]:.1f} s; verdict -> clean teardown {cold[1]:.1f} s",
        f"  warm, median of {len(warm)}: command -> verdict {verdict:.1f} s "
        f"({mark(verdict, TARGET_VERDICT_S)} the {TARGET_VERDICT_S:g} s target); "
        f"verdict -> clean teardown {teardown:.1f} s "
        f"({mark(teardown, TARGET_TEARDOWN_S)} the {TARGET_TEARDOWN_S:g} s target)",
        *docker_lines(),
    ]


def docker_lines() -> list[str]:
    """The docker runtime's figures (warm image, then warm uv cache), or why there are none."""
    from bandkit.dockercli import image_exists
    from bandkit.image.facts import LOCAL_TAG

    if not docker_ok() or not image_exists(LOCAL_TAG):
        return [f"demo happy on docker: skipped (needs a Docker daemon and {LOCAL_TAG})"]
    try:
        with scratch_run("bench-demo-docker-") as run_dir:
            first = timed_round(run_dir, "docker")
            rounds = [timed_round(run_dir, "docker") for _ in range(sized(DOCKER_ROUNDS, 1))]
    except RuntimeError as exc:  # keep the local figures; say why docker has none
        return [f"demo happy on docker: failed: {why_failed(exc)}"]
    verdict = statistics.median(v for v, _ in rounds)
    teardown = statistics.median(t for _, t in rounds)
    each = ", ".join(f"{v:.1f}/{t:.1f}" for v, t in rounds)
    return [
        "demo happy on the docker runtime (own emulator, 3 kit-image containers, DEMO_GRACE_S=0):",
        f"  first: command -> verdict {first[0]:.1f} s; verdict -> clean teardown {first[1]:.1f} s",
        f"  warm, median of {len(rounds)} ({each} s): command -> verdict {verdict:.1f} s "
        f"({_mark(verdict, TARGET_DOCKER_VERDICT_S)} the {TARGET_DOCKER_VERDICT_S:g} s target); "
        f"verdict -> clean teardown {teardown:.1f} s "
        f"({_mark(teardown, TARGET_TEARDOWN_S)} the {TARGET_TEARDOWN_S:g} s target)",
    ]


def _mark(value: float, target: float) -> str:
    return "within" if value <= target else "OVER"
