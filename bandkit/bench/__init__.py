"""Benchmarks run by `nox -s bench` (`python -m bandkit.bench [--quick] [name ...]`).

Each benchmark is a module here with `run() -> list[str]`: it measures, compares with the
upstream kit where that runs here, and returns the lines to print (figures and ratios).
Register it in `BENCHES` below, with its one-line summary and the test lanes its quick
run belongs to (`tests/bench/test_quick.py`: "e2e" needs no Docker, "docker" does,
"cluster" starts the local swarm).

Quick mode (`--quick`, or `BANDKIT_BENCH_QUICK=1` in the environment) runs each benchmark
once at its smallest sizes (`sized(full, small)`): not figures to compare, a proof that
every benchmark still runs. `BANDKIT_BENCH_DOCKER=0` makes every benchmark treat Docker
as absent (`docker_ok`): its Docker parts then say they were skipped, as without a daemon.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Final, TypeVar

QUICK_ENV: Final = "BANDKIT_BENCH_QUICK"
DOCKER_ENV: Final = "BANDKIT_BENCH_DOCKER"
T = TypeVar("T")


@dataclass(frozen=True)
class Bench:
    module: str  # under bandkit.bench; defines `run() -> list[str]`
    summary: str  # one line, for `--help`
    lanes: tuple[str, ...]  # where its quick run is tested: "e2e" (no Docker), "docker"


BENCHES: Final[dict[str, Bench]] = {
    "launcher": Bench(
        "launcher",
        "launcher start -> the agent's first line, ours vs band-sdk's (root: uid 1000 via setpriv)",
        ("e2e",),
    ),
    "image": Bench(
        "image",
        "kit image size, build, start and first-line times, ours vs an upstream-like image",
        ("docker",),
    ),
    "image_multiarch": Bench(
        "image_multiarch",
        "amd64+arm64 builds: the side buildx builder vs the per-arch fallback (root)",
        ("docker",),
    ),
    "emulator": Bench(
        "emulator", "emulator echo round trip (a real echo agent) and a many-agent run", ("e2e",)
    ),
    "emulator_rooms": Bench(
        "emulator_rooms", "an agent creates rooms and recruits a running echo peer", ("e2e",)
    ),
    "runtimes": Bench(
        "runtimes",
        "manifest writes, credential-proxy overhead, provisioning, local create/start -> echo",
        ("e2e",),
    ),
    "demo": Bench(
        "demo",
        "demo.up happy, command -> verdict -> teardown, local then docker (`demo --brains "
        "stub`: the framework brains)",
        ("e2e", "docker"),
    ),
    "smoke": Bench(
        "smoke",
        "the automated smoke's recovery times per runtime (docker restarts the daemon)",
        ("e2e",),
    ),
    "newcomer": Bench(
        "newcomer",
        "`uv run invoke build push` as typed, then the README's first agent per runtime",
        ("e2e",),  # its build push retags the user's band-python-kit:local: not in a test
    ),
    "restarts": Bench(
        "restarts",
        "local runtime: platform kill -9 -> platform.up -> agent answering; a simulated "
        "reboot -> kit.resume --all -> every agent answering (1 and 10 agents)",
        ("e2e",),
    ),
    "proxy": Bench(
        "proxy", "the hardened credential proxy's cost on one HTTP round trip", ("e2e",)
    ),
    "agent_image": Bench(
        "agent_image",
        "the sync phase at start and the bytes it downloads: kit image vs agent image",
        ("docker",),
    ),
    "cluster": Bench(
        "cluster",
        "local 3-node swarm: up, down, 3 replicas, a rolling update, a drain (root)",
        ("cluster",),
    ),
    "swarm": Bench(
        "swarm",
        "a fleet of 30 echo agents on the local 3-node swarm: fleet.up, echo p95, a drain, "
        "a rollout with markers (root)",
        ("cluster",),
    ),
    "fleet": Bench(
        "fleet", "fleet.render --target kubernetes of 100 agents, and its kustomize build", ("e2e",)
    ),
    "release": Bench(
        "release", "release.publish rehearsal against two registries on 127.0.0.1", ("docker",)
    ),
}


def quick() -> bool:
    """Quick mode: one iteration, the smallest sizes."""
    return os.environ.get(QUICK_ENV, "").strip() not in ("", "0")


def sized(full: T, small: T) -> T:
    """`small` in quick mode, else `full`."""
    return small if quick() else full


def docker_ok() -> bool:
    """A Docker daemon answers, and `BANDKIT_BENCH_DOCKER=0` does not say to do without."""
    if os.environ.get(DOCKER_ENV, "").strip() == "0":
        return False
    from bandkit.dockercli import docker_answers

    return docker_answers()
