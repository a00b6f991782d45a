"""Smoke benchmark: the automated smoke (`smoke.run.run_all`) run end to end N times per
runtime (local, then docker when a daemon answers and the kit image is built).

Per drill: outage → reconnect (from the restore: the network back, the sandbox thawed,
the box relaunched or the Docker daemon back, the platform up) and outage → first reply
(the ack of the message sent during the outage, from the restore), as p50 (and max) over
the runs; and the whole smoke's wall time. Everything is real and on 127.0.0.1 or on the
networks the docker runtime makes: the smoke's own local platform, the launcher running
smoke/agent, the SDK's own reconnect logic. Targets: reconnect ≤ 5 s after the network
returns or the sandbox thaws, recovery after a daemon restart ≤ 30 s, the whole smoke
≤ 3 min on docker.

The SDK's reconnect backoff (`ReconnectPolicy`: min(max_delay, base·factor^attempt)
with equal jitter, the attempt counter reset only after a connection lived
`stable_reset_s`; every failed connect also counts as a rapid disconnect, and from the
third one on the wait is a 15-60 s hold-down) bounds the figures where the agent's
connect attempts fail during the outage (docker's network cut: no route at all; the
platform restart: refused). The smoke
agent logs every delay the SDK computes; the lines report the waits measured.

`BANDKIT_BENCH_SMOKE_RUNS` (default 5; 1 in quick mode) sets N;
`BANDKIT_BENCH_SMOKE_RUNTIMES` (default `local,docker,docker+heal`; `local` in quick mode,
whose one run is the network drill alone) the variants (`docker+heal`: the docker network
drill alone, with the kit's health check restarting an agent still offline `HEAL_AFTER_S` after the
network returned: what the kit can do about the SDK's backoff);
`BANDKIT_BENCH_SMOKE_FREEZE` the sleep drill's freeze in seconds (default: the SDK's
watchdog threshold + 5); `BANDKIT_BENCH_SMOKE_IMAGE` the docker image. The docker
daemon drill restarts the host's Docker daemon (every other container on it would stop:
the drill refuses while others run). The upstream kit's smoke is manual (an operator
cuts Wi-Fi and sleeps the host), so there is nothing to compare with.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bandkit.bench import docker_ok, quick, sized

RUNS_ENV = "BANDKIT_BENCH_SMOKE_RUNS"
RUNTIMES_ENV = "BANDKIT_BENCH_SMOKE_RUNTIMES"
FREEZE_ENV = "BANDKIT_BENCH_SMOKE_FREEZE"
IMAGE_ENV = "BANDKIT_BENCH_SMOKE_IMAGE"
HEAL_VARIANT = "docker+heal"  # the network drill only, with the kit's health check
HEAL_AFTER_S = 3.0
TARGET_RECONNECT_S = 5.0
TARGET_DAEMON_S = 30.0
TARGET_WALL_S = 180.0


def _p50(values: list[float]) -> str:
    if not values:
        return "n/a"
    return f"p50 {statistics.median(values):.2f}s (max {max(values):.2f}s, n={len(values)})"


def _verdict(values: list[float], limit: float) -> str:
    if not values:
        return "NOT MEASURED"
    return "meets" if statistics.median(values) <= limit else "MISSES"


def _policy_line() -> str:
    from phoenix_channels_python_client.client_types import (  # type: ignore[import-untyped]
        ReconnectPolicy,
    )

    p = ReconnectPolicy(reconnect_on_normal_close=True)
    steps = [min(p.max_delay_s, p.base_delay_s * p.factor**n) for n in range(4)]
    schedule = ", ".join(f"{d / 2:g}-{d:g}s" for d in steps)
    low, high = p.rapid_hold_down_jitter_low_ratio, p.rapid_hold_down_jitter_high_ratio
    return (
        f"SDK reconnect backoff (band-sdk's ReconnectPolicy): {schedule}, ... up to "
        f"{p.max_delay_s:g}s (equal jitter); but every failed connect counts as a rapid "
        f"disconnect, with floors {p.rapid_first_min_delay_s:g}s and "
        f"{p.rapid_second_min_delay_s:g}s, and from the third within {p.rapid_window_s:g}s "
        f"a hold-down of {p.rapid_cooldown_base_s:g}s (+{p.rapid_cooldown_step_s:g}s per "
        f"step) x {low:g}-{high:g}: an outage during which connects fail fast ends with a "
        f"wait of up to {p.rapid_cooldown_base_s:g}s before the next attempt. What the kit "
        "can do: a health check that restarts an agent still offline a few seconds after "
        "its network returned (docker+heal), since a fresh process starts with no hold-down"
    )


@dataclass
class Figures:
    runtime: str
    verdicts: list[str] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    reconnect: dict[str, list[float]] = field(default_factory=dict)
    reply: dict[str, list[float]] = field(default_factory=dict)
    outage: dict[str, list[float]] = field(default_factory=dict)
    last_wait: dict[str, list[float]] = field(default_factory=dict)  # the SDK's last backoff
    waits: dict[str, int] = field(default_factory=dict)  # how many backoff waits in all


def _measure(variant: str, runs: int, freeze: float | None, image: str | None) -> Figures:
    from smoke import drills as dr
    from smoke import run as smoke_run

    figures = Figures(variant)
    root = Path(tempfile.mkdtemp(prefix="bench-smoke-", dir="/tmp"))
    root.chmod(0o755)  # the agent uid must enter it
    heal = variant == HEAL_VARIANT
    try:
        for _ in range(runs):
            options = smoke_run.Options(
                runtime="docker" if heal else variant,
                drills=[dr.Drill.NETWORK] if heal or quick() else list(dr.Drill),
                freeze_s=freeze,
                image=image,
                heal_after_s=HEAL_AFTER_S if heal else None,
            )
            outcome = smoke_run.run_all(root, options, log=lambda _line: None)
            figures.verdicts.append(str(outcome.verdict))
            figures.walls.append(outcome.wall_s)
            for result in outcome.results:
                name = str(result.drill)
                figures.outage.setdefault(name, []).append(result.timings.outage_s)
                if result.timings.reconnect_s is not None:
                    figures.reconnect.setdefault(name, []).append(result.timings.reconnect_s)
                if result.timings.reply_s is not None:
                    figures.reply.setdefault(name, []).append(result.timings.reply_s)
                if result.backoff_s:
                    figures.last_wait.setdefault(name, []).append(result.backoff_s[-1])
                figures.waits[name] = figures.waits.get(name, 0) + len(result.backoff_s)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return figures


def _lines(fig: Figures) -> list[str]:
    from smoke import drills as dr

    limits = {
        dr.Drill.NETWORK: TARGET_RECONNECT_S,
        dr.Drill.SLEEP: TARGET_RECONNECT_S,
        dr.Drill.DAEMON: TARGET_DAEMON_S,
    }
    lines = [f"smoke[{fig.runtime}]: {len(fig.verdicts)} run(s): {', '.join(fig.verdicts)}"]
    if quick() and fig.runtime != HEAL_VARIANT:
        lines[0] += " (quick mode: the network drill alone, so the verdict is INCOMPLETE)"
    if fig.runtime == HEAL_VARIANT:
        lines[0] += (
            f" (network drill only; the agent's container restarted when still offline "
            f"{HEAL_AFTER_S:g}s after the network returned)"
        )
    for drill in dr.Drill:
        name = str(drill)
        if name not in fig.reconnect and name not in fig.reply:
            continue
        limit = limits.get(drill)
        reconnect = fig.reconnect.get(name, [])
        target = (
            f" [target ≤ {limit:g}s: {_verdict(reconnect, limit)}]"
            if limit is not None
            else " [no target]"
        )
        lines.append(f"smoke[{fig.runtime}] {name}: outage {_p50(fig.outage.get(name, []))}")
        lines.append(f"smoke[{fig.runtime}] {name}: outage → reconnect {_p50(reconnect)}{target}")
        lines.append(
            f"smoke[{fig.runtime}] {name}: outage → first reply {_p50(fig.reply.get(name, []))}"
        )
        if fig.waits.get(name):
            lines.append(
                f"smoke[{fig.runtime}] {name}: SDK backoff: {fig.waits[name]} wait(s) in all, "
                f"the last wait before reconnecting {_p50(fig.last_wait.get(name, []))}"
            )
    wall_target = (
        f" [target ≤ {TARGET_WALL_S:g}s: {_verdict(fig.walls, TARGET_WALL_S)}]"
        if fig.runtime == "docker"
        else ""
    )
    if fig.runtime != HEAL_VARIANT:
        lines.append(f"smoke[{fig.runtime}]: whole automated smoke {_p50(fig.walls)}{wall_target}")
    return lines


def run() -> list[str]:
    from smoke import drills as dr
    from smoke import run as smoke_run

    runs = int(os.environ.get(RUNS_ENV, sized("5", "1")))
    freeze = float(os.environ[FREEZE_ENV]) if os.environ.get(FREEZE_ENV) else None
    image = os.environ.get(IMAGE_ENV) or None
    spec = os.environ.get(RUNTIMES_ENV, sized(f"local,docker,{HEAL_VARIANT}", "local"))
    wanted = [r.strip() for r in spec.split(",")]
    freeze_s = freeze if freeze is not None else dr.default_freeze_s()
    lines = [
        f"smoke: {runs} automated run(s) per runtime; sleep drill freeze {freeze_s:g}s, "
        f"network outage local {dr.NETWORK_OUTAGE_S:g}s / docker {dr.default_freeze_s():g}s, "
        f"platform down {dr.PLATFORM_DOWN_S:g}s, daemon down {dr.DAEMON_DOWN_S:g}s"
    ]
    for runtime in (r for r in wanted if r):
        if runtime in ("docker", HEAL_VARIANT):
            usable = docker_ok()
            chosen = smoke_run.runtime_choice("auto", image, log=lambda _l: None) if usable else ""
            if chosen != "docker":
                lines.append("smoke[docker]: NOT MEASURED (no daemon answers or no kit image)")
                continue
        lines += _lines(_measure(runtime, runs, freeze, image))
    lines.append(_policy_line())
    return lines
