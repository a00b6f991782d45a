"""The CI matrix, from one registry in code.

A lane is a nox session that CI runs as one matrix entry. `matrix()` is what
`nox -s lanes` prints (and writes to `$GITHUB_OUTPUT` in Actions); `unknown_lanes()`
reads the workflows and returns every lane they gate on that the registry does not
emit, so a renamed or deleted lane cannot leave a dead `if:` behind.

A workflow gates on a lane by `matrix.lane == '<id>'` (or `!=`) in an expression, or
by listing lane ids literally under `strategy.matrix.lane`.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml


@dataclass(frozen=True)
class Lane:
    """One CI matrix entry: the nox session it runs and what the runner must provide."""

    id: str
    session: str
    docker: bool = False
    sbx: bool = False
    live: bool = False
    browser: bool = False
    apt: tuple[str, ...] = ()  # Debian packages the runner installs first (`invoke ci.prepare`)


LANES: tuple[Lane, ...] = (
    Lane("lint", "lint", apt=("shellcheck",)),
    Lane("typecheck", "typecheck"),
    Lane("floors", "floors"),  # the dependency floors, resolved from PyPI
    Lane("tests", "tests"),
    Lane("e2e", "e2e", browser=True, apt=("chromium", "fonts-liberation")),
    Lane(
        "docker_tests",
        "docker_tests",
        docker=True,
        # qemu + binfmt: arm64 bases and builds; iproute2: the side builder's bridge;
        # gpgv + the Debian keyring: debootstrap and the side builder verify what they fetch
        # (present on Debian, not on an Ubuntu runner).
        # iptables: the host firewall of every docker sandbox (hostguard).
        apt=(
            "iptables",
            "docker-registry",
            "debootstrap",
            "openssl",
            "qemu-user-static",
            "binfmt-support",
            "iproute2",
            "gpgv",
            "debian-archive-keyring",
        ),
    ),
    # The local multi-node swarm: ip (namespaces, bridge, veths) and its daemons.
    Lane("cluster_tests", "cluster_tests", docker=True, apt=("iproute2",)),
)

_GATE = re.compile(r"matrix\.lane\s*[!=]=\s*['\"]([^'\"]+)['\"]")


def lane(lane_id: str, lanes: tuple[Lane, ...] = LANES) -> Lane:
    for candidate in lanes:
        if candidate.id == lane_id:
            return candidate
    known = ", ".join(sorted(lane_ids(lanes)))
    raise KeyError(f"unknown lane {lane_id!r}; known lanes: {known}")


def lane_ids(lanes: tuple[Lane, ...] = LANES) -> set[str]:
    return {lane.id for lane in lanes}


def matrix(lanes: tuple[Lane, ...] = LANES, *, live: bool = False) -> dict[str, Any]:
    """The `strategy.matrix` object: `{"include": [...]}`; live lanes only when asked."""
    return {
        "include": [
            {"lane": lane.id, **{k: v for k, v in asdict(lane).items() if k != "id"}}
            for lane in lanes
            if live or not lane.live
        ]
    }


def matrix_json(lanes: tuple[Lane, ...] = LANES, *, live: bool = False) -> str:
    return json.dumps(matrix(lanes, live=live), separators=(",", ":"), sort_keys=True)


def _literal_lanes(node: Any) -> list[str]:
    """Lane ids listed literally under any `strategy.matrix.lane` in a parsed workflow."""
    found: list[str] = []
    if isinstance(node, dict):
        strategy = node.get("strategy")
        if isinstance(strategy, dict) and isinstance(strategy.get("matrix"), dict):
            listed = strategy["matrix"].get("lane")
            if isinstance(listed, list):
                found.extend(str(item) for item in listed)
        for value in node.values():
            found.extend(_literal_lanes(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_literal_lanes(item))
    return found


def gated_lanes(workflow_text: str) -> set[str]:
    """Every lane id a workflow's text gates on or lists."""
    gated = set(_GATE.findall(workflow_text))
    gated.update(_literal_lanes(yaml.safe_load(workflow_text)))
    return gated


def unknown_lanes(workflows_dir: Path, lanes: tuple[Lane, ...] = LANES) -> dict[str, set[str]]:
    """Workflow file name -> lane ids it uses that the registry does not emit."""
    known = lane_ids(lanes)
    problems: dict[str, set[str]] = {}
    for path in sorted([*workflows_dir.glob("*.yml"), *workflows_dir.glob("*.yaml")]):
        bad = gated_lanes(path.read_text(encoding="utf-8")) - known
        if bad:
            problems[path.name] = bad
    return problems


def main(workflows_dir: Path = Path(".github/workflows")) -> int:
    """Print the matrix; write it to `$GITHUB_OUTPUT` when set; fail on unknown lanes."""
    import os
    import sys

    text = matrix_json()
    print(text)
    output = os.environ.get("GITHUB_OUTPUT")
    if output:
        with open(output, "a", encoding="utf-8") as fh:
            fh.write(f"matrix={text}\n")
    problems = unknown_lanes(workflows_dir)
    for name, bad in problems.items():
        known = ", ".join(sorted(lane_ids()))
        print(
            f"lanes: {workflows_dir / name} gates on unknown lane(s) {', '.join(sorted(bad))}; "
            f"known lanes: {known}. Add the lane to bandkit/ci/lanes.py LANES or fix the workflow.",
            file=sys.stderr,
        )
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
