"""Demo benchmark with the framework brains: `nox -s bench -- demo --brains stub`.

Like `demo` (fresh `python -m invoke demo.up --platform local --runtime local --headless
--scenario happy` processes in one scratch run directory, `DEMO_GRACE_S=0`, timed from
the host: command -> verdict, verdict -> clean exit), with `--brains stub`: the real
Claude SDK, Codex and CrewAI adapters against the LLM stub each run starts and stops.
One cold round (new uv cache: the three `brains` groups synced; the codex CLI installed
from npm), then `WARM_ROUNDS`. Target: command -> verdict <= 90 s.

Per framework, from the stub's request journal (`<run dir>/demo/llm/llm-requests.jsonl`)
of the warm rounds: turn latency at the stub, request in -> last stream event
(`ms_last`; the whole JSON body for CrewAI's non-streaming chat completions).

Then, when a daemon answers and the CLI image is built, `DOCKER_ROUNDS` runs on the
docker runtime (`--runtime docker`), against the same 90 s target.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Final

from bandkit.bench import docker_ok, sized
from bandkit.bench.demo_rounds import scratch_run, timed_round, why_failed

WARM_ROUNDS: Final = 2
DOCKER_ROUNDS: Final = 3
TARGET_VERDICT_S: Final = 90.0
FRAMEWORKS: Final = {
    "anthropic.messages": "claude (PM)",
    "openai.responses": "codex (Dev)",
    "openai.chat": "crewai (Architect)",
}


def journal(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "demo" / "llm" / "llm-requests.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def latencies(turns: list[dict[str, Any]]) -> list[str]:
    lines = []
    for api, framework in FRAMEWORKS.items():
        ms = sorted(float(t["ms_last"]) for t in turns if t["api"] == api and t.get("ms_last"))
        if not ms:
            lines.append(f"  {framework} ({api}): no requests")
            continue
        p95 = ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))]
        lines.append(
            f"  {framework} ({api}): {len(ms)} requests, median {statistics.median(ms):.1f} ms, "
            f"p95 {p95:.1f} ms, max {ms[-1]:.1f} ms"
        )
    return lines


def run(options: list[str]) -> list[str]:
    if options != ["--brains", "stub"]:
        raise SystemExit(f"bench demo: unknown options {options}; known: --brains stub")
    with scratch_run("bench-demo-stub-") as run_dir:
        cold = timed_round(run_dir, "local", "stub")
        seen = len(journal(run_dir))
        warm = [timed_round(run_dir, "local", "stub") for _ in range(sized(WARM_ROUNDS, 1))]
        turns = journal(run_dir)[seen:]
    return [
        "demo happy --brains stub on the local runtime (real Claude SDK, Codex and CrewAI "
        "adapters, the LLM stub, DEMO_GRACE_S=0):",
        f"  cold: command -> verdict {cold[0]:.1f} s; verdict -> clean teardown {cold[1]:.1f} s",
        summary(warm, "warm"),
        "  turn latency at the stub (request in -> last stream event), warm rounds:",
        *latencies(turns),
        *docker_lines(),
    ]


def summary(rounds: list[tuple[float, float]], what: str) -> str:
    verdict = statistics.median(v for v, _ in rounds)
    teardown = statistics.median(t for _, t in rounds)
    each = ", ".join(f"{v:.1f}/{t:.1f}" for v, t in rounds)
    mark = "within" if verdict <= TARGET_VERDICT_S else "OVER"
    return (
        f"  {what}, median of {len(rounds)} ({each} s): command -> verdict {verdict:.1f} s "
        f"({mark} the {TARGET_VERDICT_S:g} s target); verdict -> clean teardown {teardown:.1f} s"
    )


def docker_lines() -> list[str]:
    """The docker runtime with the CLI image already built (warm image), or why not."""
    from bandkit.demo.cli_image import CLI_TAG
    from bandkit.dockercli import image_exists

    if not docker_ok() or not image_exists(CLI_TAG):
        return [
            f"demo happy --brains stub on docker: skipped (needs a Docker daemon and {CLI_TAG}: "
            "`uv run invoke demo.build --brains stub`)"
        ]
    try:
        with scratch_run("bench-demo-stub-docker-") as run_dir:
            count = sized(DOCKER_ROUNDS, 1)
            rounds = [timed_round(run_dir, "docker", "stub") for _ in range(count)]
    except RuntimeError as exc:
        return [f"demo happy --brains stub on docker: failed: {why_failed(exc)}"]
    return [
        "demo happy --brains stub on the docker runtime (CLI image containers; each syncs "
        "its framework venv from the package index, as every docker run does):",
        summary(rounds, "runs"),
    ]
