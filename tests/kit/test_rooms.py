"""Rooms in a run manifest: recorded before they exist, deleted by teardown against the
emulator (404 = already gone), each failure reported with its entry kept, and the room
remover registered next to the agent remover in `kit.unprovision`."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from bandkit.kit import commands as provision_run
from bandkit.kit.rooms import create_room, room_key
from bandkit.manifest import Kind, Manifest, teardown
from tests.runtimes.helpers import Platform


def room_exists(platform: Platform, room_id: str) -> bool:
    with platform.client() as c:
        status = c.get(f"/api/v1/me/chats/{room_id}").status_code
    assert status in (200, 404), status
    return status == 200


def dead_url() -> str:
    """A loopback URL nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_teardown_deletes_a_recorded_room_and_a_rerun_is_a_noop(
    platform: Platform, tmp_path: Path
) -> None:
    path = tmp_path / "m.json"
    key = platform.user_key
    with Manifest.open(path, secrets=[key]) as m:
        room_id = create_room(m, api_key=key, rest_url=platform.rest_url, title="rooms-t1")
        entry = m.find(Kind.ROOM, room_key(platform.rest_url, "rooms-t1"))
        assert entry is not None
        assert entry.details["id"] == room_id
        assert room_exists(platform, room_id)
        assert key not in path.read_text()

        report = teardown(m, provision_run.platform_removers(key, m), redact=[key])
        assert report.clean, report.lines()
        assert report.lines() == [f"removed room:{platform.rest_url}#rooms-t1"]
        assert not room_exists(platform, room_id)
        assert not path.exists()

        # The same entry again (a re-run after a crash that followed the delete): 404 = gone.
        m.record(Kind.ROOM, entry.key, **entry.details)
        again = teardown(m, provision_run.platform_removers(key, m), redact=[key])
        assert again.clean, again.lines()
        assert m.resources == ()
        # And an empty manifest: nothing to do.
        assert teardown(m, provision_run.platform_removers(key, m)).lines() == []


def test_a_failure_is_reported_per_item_and_its_entry_kept(
    platform: Platform, tmp_path: Path
) -> None:
    path = tmp_path / "m.json"
    key = platform.user_key
    with Manifest.open(path, secrets=[key]) as m:
        good = create_room(m, api_key=key, rest_url=platform.rest_url, title="rooms-good")
        unreachable = dead_url()
        m.record(Kind.ROOM, room_key(unreachable, "rooms-bad"), url=unreachable, id="r-404")
        report = teardown(m, provision_run.platform_removers(key, m), redact=[key])
        assert [r.ref for r in report.removed] == [f"room:{platform.rest_url}#rooms-good"]
        assert [(r.ref, "does not answer" in msg) for r, msg in report.failed] == [
            (f"room:{unreachable}#rooms-bad", True)
        ]
        assert not room_exists(platform, good)
        assert [r.key for r in m.resources] == [room_key(unreachable, "rooms-bad")]
    with Manifest.open(path) as m:  # kept on disk for the re-run
        assert [r.details["id"] for r in m.resources] == ["r-404"]


def test_a_refused_delete_is_a_failure_not_a_success(platform: Platform, tmp_path: Path) -> None:
    with Manifest.open(tmp_path / "m.json") as m:
        room_id = create_room(
            m, api_key=platform.user_key, rest_url=platform.rest_url, title="rooms-401"
        )
        wrong = "wrong-user-key-5d1e"
        report = teardown(m, provision_run.platform_removers(wrong, m), redact=[wrong])
        assert [msg for _r, msg in report.failed] == [f"deleting room {room_id} failed: HTTP 401"]
        assert room_exists(platform, room_id)
        assert len(m.resources) == 1


def test_an_entry_without_id_is_found_by_exact_title(platform: Platform, tmp_path: Path) -> None:
    key = platform.user_key
    with Manifest.open(tmp_path / "m.json") as m:
        # Recorded, then the run died before learning the id; the room was made anyway.
        m.record(Kind.ROOM, room_key(platform.rest_url, "rooms-crash"), url=platform.rest_url,
                 title="rooms-crash")  # fmt: skip
        made = platform.call("POST", "/api/v1/me/chats", json={"chat": {"title": "rooms-crash"}})
        other = platform.call("POST", "/api/v1/me/chats", json={"chat": {"title": "rooms-crash2"}})
        report = teardown(m, provision_run.platform_removers(key, m))
        assert report.clean, report.lines()
        assert not room_exists(platform, made["data"]["id"])
        assert room_exists(platform, other["data"]["id"])  # only the exact title

        # Never made at all: nothing to delete, success.
        m.record(Kind.ROOM, room_key(platform.rest_url, "rooms-never"), url=platform.rest_url,
                 title="rooms-never")  # fmt: skip
        assert teardown(m, provision_run.platform_removers(key, m)).clean

        # Two rooms with that title: refuse to guess, keep the entry.
        m.record(Kind.ROOM, room_key(platform.rest_url, "rooms-twice"), url=platform.rest_url,
                 title="rooms-twice")  # fmt: skip
        twins = [
            platform.call("POST", "/api/v1/me/chats", json={"chat": {"title": "rooms-twice"}})
            for _ in range(2)
        ]
        report = teardown(m, provision_run.platform_removers(key, m))
        assert len(report.failed) == 1
        assert "2 rooms are titled" in report.failed[0][1]
        assert all(room_exists(platform, t["data"]["id"]) for t in twins)
        assert len(m.resources) == 1


def test_unprovision_removes_rooms_with_the_user_key(platform: Platform, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    path = provision_run.manifest_path(run_dir, "with-room")
    with Manifest.open(path, secrets=[platform.user_key]) as m:
        room_id = create_room(
            m, api_key=platform.user_key, rest_url=platform.rest_url, title="rooms-unprov"
        )
    report = provision_run.unprovision("with-room", run_dir=run_dir, api_key=platform.user_key)
    assert report.clean, report.lines()
    assert not room_exists(platform, room_id)
    assert not path.exists()
    with httpx.Client(base_url=platform.rest_url) as c:  # no key: the API refuses
        assert c.get(f"/api/v1/me/chats/{room_id}").status_code == 401
