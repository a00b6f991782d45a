"""The local platform keeps its identity across restarts (issue 26): `platform.up` in a
run directory whose platform died (`kill -9`) or was stopped comes back on the same
address, from the same state (its id, its keys, its agents); a port someone else took
meanwhile is a clear error naming it, never another port in silence."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import httpx
import pytest

from bandkit import daemons
from bandkit.emulator import service
from bandkit.emulator.state import EmulatorState
from tests.support.wait import wait_for


def _kill(record: service.RunRecord) -> None:
    os.kill(record.pid, signal.SIGKILL)
    wait_for(lambda: not daemons.runs_module(record.pid, service.MODULE), 10, "the kill")


def _register(record: service.RunRecord) -> str:
    key = service.read_user_key(record)
    body = {"agent": {"name": "survivor", "description": "an agent across restarts"}}
    made = httpx.post(
        f"{record.rest_url}/api/v1/me/agents/register",
        json=body,
        headers={"x-api-key": key},
        timeout=10,
    )
    made.raise_for_status()
    return str(made.json()["data"]["credentials"]["api_key"])


def _agent_me(record: service.RunRecord, agent_key: str) -> int:
    return httpx.get(
        f"{record.rest_url}/api/v1/agent/me", headers={"x-api-key": agent_key}, timeout=10
    ).status_code


def test_kill_9_then_up_is_the_same_platform_on_the_same_address(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first, _ = service.up(run_dir)
    try:
        assert first.platform_id.startswith("emu_")
        assert service.health(first)["platform_id"] == first.platform_id
        agent_key = _register(first)
        state = run_dir / service.STATE_FILE  # saved just after the answer: wait for it
        wait_for(lambda: "survivor" in state.read_text(), 10, "the state to hold the agent")
        _kill(first)
        assert "brings it back on port" in service.status(run_dir)[0]

        again, started = service.up(run_dir)
        assert started
        assert again.pid != first.pid
        assert (again.rest_url, again.ws_url) == (first.rest_url, first.ws_url)
        assert again.platform_id == first.platform_id
        assert _agent_me(again, agent_key) == 200  # its keys and agents: the same state

        service.down(run_dir)  # a clean stop keeps the address as well
        third, _ = service.up(run_dir)
        assert (third.rest_url, third.platform_id) == (first.rest_url, first.platform_id)
    finally:
        service.down(run_dir)


def test_a_taken_port_is_named_with_what_to_do(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first, _ = service.up(run_dir)
    port = int(first.rest_url.rsplit(":", 1)[1])
    service.down(run_dir)
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    try:
        with pytest.raises(service.PlatformError) as caught:
            service.up(run_dir)
        message = str(caught.value)
        assert f"port {port} on 127.0.0.1" in message
        assert "is taken by another process" in message
        assert f"ss -ltnp 'sport = :{port}'" in message
        assert "platform.up --port N" in message
        assert service.last_record(run_dir) == (None, False)  # nothing was started
    finally:
        squatter.close()
    again, _ = service.up(run_dir)  # freed: back where it was
    try:
        assert again.rest_url == first.rest_url
    finally:
        service.down(run_dir)


def test_a_state_file_from_before_ids_gets_one_and_keeps_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first, _ = service.up(run_dir)
    service.down(run_dir)
    state_file = run_dir / service.STATE_FILE
    old = json.loads(state_file.read_text())
    del old["platform_id"]  # as written before platforms had ids
    state_file.write_text(json.dumps(old))
    assert service.state_identity(state_file) == ""
    second, _ = service.up(run_dir)
    try:
        assert second.platform_id.startswith("emu_")
        assert second.platform_id != first.platform_id
        assert service.state_identity(state_file) == second.platform_id  # saved at startup
    finally:
        service.down(run_dir)
    third, _ = service.up(run_dir)
    try:
        assert third.platform_id == second.platform_id
    finally:
        service.down(run_dir)


def test_the_id_is_made_once_with_a_state() -> None:
    a = EmulatorState.model_validate({"user": _user()})
    b = EmulatorState.model_validate({"user": _user()})
    assert a.platform_id != b.platform_id
    again = EmulatorState.model_validate_json(a.model_dump_json())
    assert again.platform_id == a.platform_id


def _user() -> dict[str, str]:
    return {
        "id": "u1",
        "name": "Local User",
        "handle": "local-user",
        "email": "user@band.local",
        "inserted_at": "2026-01-01T00:00:00Z",
    }
