"""Teardown of platform resources recorded without an id acts only on proof of ownership.

A run that stopped before the platform answered leaves a manifest entry with a name or a
title and no id. The remover may delete what it finds only when it was created after the
entry was recorded (and, for an agent, carries the description we sent); a same-named
agent or room that predates the run is reported and kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.kit.commands import agent_remover
from bandkit.kit.rooms import room_key, room_remover
from bandkit.manifest import Kind, Manifest, teardown
from tests.runtimes.helpers import Platform, emulator


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Platform]:
    with emulator(Path(tmp_path_factory.mktemp("emu"))) as p:
        yield p


def _register(platform: Platform, name: str, description: str) -> str:
    body = {"agent": {"name": name, "description": description}}
    data = platform.call("POST", "/api/v1/me/agents/register", json=body)
    return str(data["data"]["agent"]["id"])


def _agents(platform: Platform) -> list[str]:
    return [a["name"] for a in platform.call("GET", "/api/v1/me/agents")["data"]]


def _rooms(platform: Platform) -> list[str]:
    return [r["title"] for r in platform.call("GET", "/api/v1/me/chats")["data"]]


def _removers(platform: Platform) -> dict[Kind, object]:
    return {
        Kind.AGENT: agent_remover(platform.user_key),
        Kind.ROOM: room_remover(platform.user_key),
    }


def test_a_foreign_same_named_agent_is_kept_and_reported(
    platform: Platform, tmp_path: Path
) -> None:
    _register(platform, "victim-agent", "somebody else's agent, made before the run")
    with Manifest.open(tmp_path / "m.json") as manifest:
        manifest.record(
            Kind.AGENT,
            f"{platform.rest_url}#victim-agent",
            name="victim-agent",
            url=platform.rest_url,
            description="the description this run sent",
        )
        report = teardown(manifest, _removers(platform))  # type: ignore[arg-type]
    assert not report.clean
    assert "nothing proves this run registered it" in "\n".join(report.lines())
    assert "victim-agent" in _agents(platform)


def test_our_agent_recorded_without_an_id_is_found_and_removed(
    platform: Platform, tmp_path: Path
) -> None:
    with Manifest.open(tmp_path / "m.json") as manifest:
        manifest.record(
            Kind.AGENT,
            f"{platform.rest_url}#ours-agent",
            name="ours-agent",
            url=platform.rest_url,
            description="registered by this run",
        )
        _register(platform, "ours-agent", "registered by this run")  # the answer was lost
        report = teardown(manifest, _removers(platform))  # type: ignore[arg-type]
    assert report.clean, report.lines()
    assert "ours-agent" not in _agents(platform)


def test_a_room_older_than_the_record_is_kept(
    platform: Platform, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    platform.call("POST", "/api/v1/me/chats", json={"chat": {"title": "kit: shared"}})
    import bandkit.kit.rooms as rooms
    import bandkit.manifest as manifest_mod

    monkeypatch.setattr(rooms, "CLOCK_SKEW", rooms.timedelta(0))
    # The record is made "later" than the room: that room cannot be this run's.
    monkeypatch.setattr(manifest_mod, "_now", lambda: "2999-01-01T00:00:00Z")
    with Manifest.open(tmp_path / "m.json") as manifest:
        manifest.record(
            Kind.ROOM,
            room_key(platform.rest_url, "kit: shared"),
            url=platform.rest_url,
            title="kit: shared",
        )
        report = teardown(manifest, _removers(platform))  # type: ignore[arg-type]
    assert report.clean  # nothing of ours was found: nothing to remove
    assert "kit: shared" in _rooms(platform)
