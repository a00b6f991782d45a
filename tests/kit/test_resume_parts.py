"""`kit.resume` reports what its start brought back, and only that: each sandbox's parts
are read again after the runtime's `resume`, and a part still down (a firewall chain that
did not come back, a proxy that did not start) fails that agent with the part named; it
is never listed as "brought back", and the agent is not counted as resumed. (Before: the
parts that had been down were listed as brought back, and the resume exited 0 with the
docker sandbox's host firewall still missing.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from bandkit.kit import resume
from bandkit.kit.platforms import PlatformRef
from bandkit.manifest import Manifest
from bandkit.runtimes.base import Part


class HalfStarted:
    """A runtime whose start brings back every part of its sandbox but `stays_down`."""

    def __init__(self, stays_down: set[str]) -> None:
        self.stays_down = stays_down
        self.started = False

    def parts(self, name: str) -> tuple[Part, ...]:
        names = ("container", "host firewall", "egress proxy", "credential proxy")
        return tuple(
            Part(part, self.started and part not in self.stays_down, "missing") for part in names
        )

    def resume(self, name: str) -> tuple[Part, ...]:
        down = tuple(part for part in self.parts(name) if not part.up)
        self.started = True
        return down


def _sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: HalfStarted
) -> tuple[resume.Outcome, list[str]]:
    monkeypatch.setattr(resume, "_runtime", lambda *_args: runtime)
    lines: list[str] = []
    with Manifest.open(tmp_path / "manifest.json") as manifest:
        recorded = resume.Recorded("my-agent", "agent-1", PlatformRef(""), "docker")
        job = resume._Job(recorded, manifest, resume.Outcome("my-agent"))
        resume._sandbox(job, tmp_path, lines.append)
    return job.outcome, lines


def test_a_part_still_down_after_the_start_fails_the_agent_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome, lines = _sandbox(tmp_path, monkeypatch, HalfStarted({"host firewall"}))
    assert not outcome.ok
    assert lines == [
        "kit.resume: my-agent: brought back (docker): container, egress proxy, credential proxy",
        "kit.resume: my-agent: FAILED: still down after its docker sandbox was started: "
        "host firewall (missing)",
    ]


def test_every_part_up_after_the_start_is_brought_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcome, lines = _sandbox(tmp_path, monkeypatch, HalfStarted(set()))
    assert outcome.ok
    assert lines == [
        "kit.resume: my-agent: brought back (docker): container, host firewall, egress proxy, "
        "credential proxy"
    ]
