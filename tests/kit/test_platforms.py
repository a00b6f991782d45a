"""Teardown can always finish (issue 26): what a record on a platform means once that
platform stopped, decided by the platform's identity (`bandkit.kit.platforms`).

Real emulators (processes), real manifests and the real removers: records on an emulator
that kept its state in memory only, or whose state file was deleted, or whose address now
serves another platform, are cleared and say why; records on one that stopped with its
state on disk, or on a real deployment that does not answer, are kept with a message
saying exactly that, unless `forget` (--forget-unreachable) clears them; a platform that
moved ports (the same id) is found where it answers now, and the removal happens there.
"""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import httpx

from bandkit import daemons
from bandkit.emulator import service
from bandkit.kit import commands
from bandkit.kit.platforms import PlatformRef, Probe, Reach, identify
from bandkit.manifest import Kind, Manifest, TeardownReport, teardown
from tests.runtimes.helpers import emulator
from tests.support.wait import wait_for


def _register(rest_url: str, key: str, name: str) -> str:
    body = {"agent": {"name": name, "description": "an agent that outlives nothing"}}
    made = httpx.post(
        f"{rest_url}/api/v1/me/agents/register", json=body, headers={"x-api-key": key}, timeout=10
    )
    made.raise_for_status()
    return str(made.json()["data"]["agent"]["id"])


def _room(rest_url: str, key: str, title: str) -> str:
    made = httpx.post(
        f"{rest_url}/api/v1/me/chats",
        json={"chat": {"title": title}},
        headers={"x-api-key": key},
        timeout=10,
    )
    made.raise_for_status()
    return str(made.json()["data"]["id"])


def _record(manifest: Manifest, ref: PlatformRef, key: str, name: str) -> None:
    """An agent and a room on `ref`'s platform, recorded as provisioning records them."""
    agent_id = _register(ref.rest_url, key, name)
    manifest.record(Kind.AGENT, f"{ref.rest_url}#{name}", name=name, url=ref.rest_url,
                    id=agent_id, **ref.details())  # fmt: skip
    room_id = _room(ref.rest_url, key, f"kit: {name}")
    manifest.record(Kind.ROOM, f"{ref.rest_url}#kit: {name}", url=ref.rest_url,
                    title=f"kit: {name}", id=room_id, **ref.details())  # fmt: skip


def _teardown(manifest: Manifest, key: str, *, forget: bool = False) -> TeardownReport:
    probe = Probe(key, forget=forget, rerun="re-run the teardown")
    return teardown(manifest, commands.platform_removers(key, manifest, probe), redact=[key])


def _kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not daemons.runs_module(pid, service.MODULE), 10, "the platform to die")


def _saved(run_dir: Path, name: str) -> None:
    state = run_dir / service.STATE_FILE
    wait_for(lambda: name in state.read_text(), 10, f"the state file to hold {name}")


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_an_in_memory_emulator_that_died_took_its_records_with_it(tmp_path: Path) -> None:
    with emulator(tmp_path / "emu") as platform:
        key = platform.user_key
        ref = identify(platform.rest_url, key)
        assert ref.emulator
        assert ref.state_file == ""  # in memory only
        with Manifest.open(tmp_path / "m.json", secrets=[key]) as manifest:
            _record(manifest, ref, key, "ephemeral")
    with Manifest.open(tmp_path / "m.json", secrets=[key]) as manifest:
        report = _teardown(manifest, key)
        assert report.clean
        assert [r.kind for r, _ in report.cleared] == [Kind.ROOM, Kind.AGENT]
        assert all("kept its state in memory only" in why for _, why in report.cleared)
        assert report.removed == []
    assert not (tmp_path / "m.json").exists()


def test_a_platform_with_its_state_on_disk_is_waited_for_unless_forgotten(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    record, _ = service.up(run_dir)
    key = service.read_user_key(record)
    try:
        ref = identify(record.rest_url, key, run_dir=run_dir)
        assert (ref.platform_id, ref.run_dir) == (record.platform_id, str(run_dir))
        assert ref.state_file == str((run_dir / service.STATE_FILE).absolute())
        path = tmp_path / "m.json"
        with Manifest.open(path, secrets=[key]) as manifest:
            _record(manifest, ref, key, "patient")
        _saved(run_dir, "patient")
        _kill(record.pid)

        with Manifest.open(path, secrets=[key]) as manifest:
            report = _teardown(manifest, key)
            assert not report.clean
            assert [r.kind for r, _ in report.failed] == [Kind.ROOM, Kind.AGENT]
            for _, why in report.failed:
                assert f"the local platform {record.platform_id}" in why
                assert "is not running; its state is kept in" in why
                assert f"`uv run invoke platform.up --run-dir {run_dir}` brings it back" in why
                assert "--forget-unreachable drops this record" in why
            assert len(manifest.resources) == 2  # kept for the re-run

        back, _ = service.up(run_dir)  # as the message says: the same address and state
        assert back.rest_url == record.rest_url
        with Manifest.open(path, secrets=[key]) as manifest:
            report = _teardown(manifest, key)
            assert report.clean
            assert len(report.removed) == 2  # removed for real, on the platform
        listed = httpx.get(f"{back.rest_url}/api/v1/me/agents", headers={"x-api-key": key})
        assert "patient" not in listed.text

        with Manifest.open(path, secrets=[key]) as manifest:
            _record(manifest, ref, key, "forgotten")
        _saved(run_dir, "forgotten")
        _kill(back.pid)
        with Manifest.open(path, secrets=[key]) as manifest:
            report = _teardown(manifest, key, forget=True)
            assert report.clean
            assert [r.kind for r, _ in report.cleared] == [Kind.ROOM, Kind.AGENT]
            assert all(
                why.startswith("forgotten (--forget-unreachable): the local platform")
                for _, why in report.cleared
            )
        assert not path.exists()
    finally:
        service.down(run_dir)


def test_a_deleted_state_or_another_platform_there_makes_the_records_moot(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    record, _ = service.up(run_dir)
    key = service.read_user_key(record)
    try:
        ref = identify(record.rest_url, key, run_dir=run_dir)
        first, second = tmp_path / "first.json", tmp_path / "second.json"
        with Manifest.open(first, secrets=[key]) as manifest:
            _record(manifest, ref, key, "first")
        with Manifest.open(second, secrets=[key]) as manifest:
            _record(manifest, ref, key, "second")
        _kill(record.pid)
        (run_dir / service.STATE_FILE).unlink()  # deleted: nothing to come back from

        with Manifest.open(first, secrets=[key]) as manifest:
            report = _teardown(manifest, key)
            assert report.clean
            assert all("its state file" in why and "is gone" in why for _, why in report.cleared)

        fresh, _ = service.up(run_dir)  # a new platform (a new state), on the old port
        assert fresh.rest_url == record.rest_url
        assert fresh.platform_id != record.platform_id
        with Manifest.open(second, secrets=[key]) as manifest:
            report = _teardown(manifest, key)
            assert report.clean
            assert len(report.cleared) == 2
            assert all(f"another platform ({fresh.platform_id})" in w for _, w in report.cleared)
    finally:
        service.down(run_dir)


def test_a_platform_that_moved_ports_is_found_by_its_id(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    record, _ = service.up(run_dir)
    key = service.read_user_key(record)
    try:
        ref = identify(record.rest_url, key, run_dir=run_dir)
        path = tmp_path / "m.json"
        with Manifest.open(path, secrets=[key]) as manifest:
            _record(manifest, ref, key, "mover")
        _saved(run_dir, "mover")
        service.down(run_dir)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            other = s.getsockname()[1]
        moved, _ = service.up(run_dir, port=other)  # moved on purpose
        assert moved.rest_url != record.rest_url
        assert moved.platform_id == record.platform_id
        standing = Probe(key).standing(ref)
        assert (standing.reach, standing.rest_url) == (Reach.UP, moved.rest_url)
        with Manifest.open(path, secrets=[key]) as manifest:
            report = _teardown(manifest, key)
            assert report.clean
            assert len(report.removed) == 2
        listed = httpx.get(f"{moved.rest_url}/api/v1/me/agents", headers={"x-api-key": key})
        assert "mover" not in listed.text
    finally:
        service.down(run_dir)


def test_a_real_deployment_that_does_not_answer_is_kept_unless_forgotten(
    tmp_path: Path,
) -> None:
    url = _dead_url()
    key = "user-key-3c91"
    ref = identify(url, key)
    assert not ref.emulator  # no answer, no id: a real deployment's URL is its identity
    path = tmp_path / "m.json"
    with Manifest.open(path, secrets=[key]) as manifest:
        manifest.record(Kind.AGENT, f"{url}#far", name="far", url=url, id="a-1")
        report = _teardown(manifest, key)
        assert [r.kind for r, _ in report.failed] == [Kind.AGENT]
        why = report.failed[0][1]
        assert f"the platform at {url} does not answer (ConnectError); it may come back" in why
        assert key not in why
        report = _teardown(manifest, key, forget=True)
        assert report.clean
        assert report.cleared[0][1].startswith("forgotten (--forget-unreachable)")
    assert not path.exists()
