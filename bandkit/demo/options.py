"""What `demo.up` was asked for: the options, in one frozen record (its own module, so
`preflight` and `run` both depend on it and not on each other)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bandkit.demo import cast_ops
from examples.docker_demo.cast import DEFAULT_TOPIC
from examples.docker_demo.scenario import DEFAULT_SCENARIO


@dataclass(frozen=True)
class UpOptions:
    run_dir: Path
    platform: str = "local"
    runtime: str = "auto"
    brains: str = "scripted"
    scenario: str = DEFAULT_SCENARIO
    topic: str = DEFAULT_TOPIC
    headless: bool = False
    keep: bool = False
    connect_timeout_s: float = cast_ops.CONNECT_TIMEOUT_S
