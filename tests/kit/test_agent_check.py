"""`agent_check.wait_online`: the platform is polled, the sandbox only now and then (asking
it runs the runtime's CLI), and a sandbox that died ends the wait with a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandkit.kit import agent_check
from bandkit.manifest import Kind, Manifest


def _platform_says(monkeypatch: pytest.MonkeyPatch, answers: list[bool]) -> list[int]:
    asked: list[int] = []

    async def online(*_args: object) -> bool:
        asked.append(1)
        return answers.pop(0) if answers else False

    monkeypatch.setattr(agent_check, "_online", online)
    monkeypatch.setattr(agent_check, "POLL_S", 0.01)
    return asked


def _wait(alive: object, timeout_s: float) -> float:
    return agent_check.wait_online(
        api_key="k", rest_url="http://127.0.0.1:9", room_id="r", agent_id="a",
        timeout_s=timeout_s, alive=alive,  # type: ignore[arg-type]
    )  # fmt: skip


def test_the_sandbox_is_asked_every_alive_interval_not_every_poll(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    polls = _platform_says(monkeypatch, [])
    monkeypatch.setattr(agent_check, "ALIVE_EVERY_S", 0.2)
    checks: list[int] = []

    def alive() -> bool:
        checks.append(1)
        return True

    with pytest.raises(agent_check.AgentCheckError, match="did not connect"):
        _wait(alive, timeout_s=0.7)
    assert len(polls) >= 20
    assert 2 <= len(checks) <= 5  # about every 0.2 s and once at the deadline


def test_a_dead_sandbox_ends_the_wait_early(monkeypatch: pytest.MonkeyPatch) -> None:
    _platform_says(monkeypatch, [])
    monkeypatch.setattr(agent_check, "ALIVE_EVERY_S", 0.05)
    with pytest.raises(agent_check.AgentCheckError, match="the sandbox stopped before agent a"):
        _wait(lambda: False, timeout_s=30)


def test_connected_returns_without_asking_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    _platform_says(monkeypatch, [False, False, True])

    def alive() -> bool:
        raise AssertionError("asked the sandbox although the agent connected")

    assert _wait(alive, timeout_s=30) < 5


def test_recorded_ids_reads_the_home_room_and_the_agent_or_names_what_is_missing(
    tmp_path: Path,
) -> None:
    """What a reader beside the kit (the fleet tests, the swarm benchmark) takes from an
    agent's provision manifest."""
    path = tmp_path / "manifest.json"
    with Manifest.open(path) as manifest:
        manifest.record(Kind.ROOM, "other", title="another room", id="room-0")
        manifest.record(Kind.AGENT, "echo-1", id="agent-1")
        with pytest.raises(agent_check.AgentCheckError, match="no home room and agent"):
            agent_check.recorded_ids(path, "echo-1")
        manifest.record(Kind.ROOM, "home", title=agent_check.home_title("echo-1"), id="room-1")
    assert agent_check.recorded_ids(path, "echo-1") == ("room-1", "agent-1")
