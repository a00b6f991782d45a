"""Room files through the SDK's file tools (`send_room_file`, `read_room_file`) and band_rest."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from band.client.rest import AsyncRestClient
from band_rest.errors import NotFoundError

from bandkit.emulator import rest_files
from bandkit.emulator.server import Emulator
from tests.emulator.conftest import StartEmulator
from tests.emulator.support import (
    ROOM,
    USER_KEY,
    assert_error,
    assert_refuses_wrong_keys,
    human_client,
    raw_client,
    seat,
    with_participants,
)

pytestmark = pytest.mark.usefixtures("no_unhandled")


def _headers(raw: bytes, name: str = "notes.txt", sha: str | None = None) -> dict[bytes, bytes]:
    return {
        b"x-file-name": name.encode(),
        b"x-file-sha256": (sha or hashlib.sha256(raw).hexdigest()).encode(),
        b"content-type": b"text/plain",
    }


@pytest.mark.parametrize(
    ("method", "path"),
    [("PUT", f"/api/v1/agent/chats/{ROOM}/files"), ("GET", f"/api/v1/agent/chats/{ROOM}/files/x")],
)
async def test_file_routes_refuse_wrong_keys(emu: Emulator, method: str, path: str) -> None:
    await assert_refuses_wrong_keys(emu.rest_url, method, path, USER_KEY)


async def test_send_list_and_read_a_room_file_through_the_sdk_tools(
    emu: Emulator, human: AsyncRestClient
) -> None:
    dev = await seat(emu.rest_url, human, "Dev")
    pm = await seat(emu.rest_url, human, "PM", room=dev.room)
    await with_participants(dev)
    sent = await dev.tools.execute_tool_call(
        "band_send_room_file",
        {"content": "line one\nline two\n", "filename": "notes.txt", "mentions": ["@pm"]},
    )
    assert isinstance(sent, dict), sent
    attachment = sent["attachment"]
    assert (attachment["name"], attachment["bytes"], attachment["content_type"]) == (
        "notes.txt",
        18,
        "text/plain",
    )
    listed = await dev.tools.list_room_files()
    assert [f["id"] for f in listed["data"]] == [attachment["id"]]
    read = await dev.tools.read_room_file(attachment["id"])
    assert read["text"] == "line one\nline two\n"
    chunks = [
        c
        async for c in pm.rest.agent_api_files.download_agent_chat_file(
            dev.room, attachment["id"], range="bytes=5-7"
        )
    ]
    assert b"".join(chunks) == b"one"
    again = await dev.tools.send_room_file("line one\nline two\n", "copy.txt", mentions=["pm"])
    assert again["attachment"]["id"] == attachment["id"]  # identical bytes: one record


async def test_ranges_headers_and_refusals(emu: Emulator, human: AsyncRestClient) -> None:
    dev = await seat(emu.rest_url, human, "Dev")
    outsider = await seat(emu.rest_url, human, "Outsider")
    raw = b"0123456789"
    files = f"/api/v1/agent/chats/{dev.room}/files"
    async with raw_client(emu.rest_url, dev.agent.key) as client:
        stored = await client.put(files, content=raw, headers=_headers(raw, "r\u00e9sum\u00e9.txt"))
        assert stored.status_code == 201, stored.text
        file_id = stored.json()["data"]["id"]
        whole = await client.get(f"{files}/{file_id}")
        assert whole.content == raw
        assert whole.headers["content-disposition"] == (
            "attachment; filename*=UTF-8''r%C3%A9sum%C3%A9.txt"
        )
        assert whole.headers["x-content-type-options"] == "nosniff"
        for span, body, status in (
            ("bytes=-3", b"789", 206),
            ("bytes=8-", b"89", 206),
            ("bytes=2-100", b"23456789", 206),
            ("lines=1-2", raw, 200),  # unparsable: the whole file
        ):
            got = await client.get(f"{files}/{file_id}", headers={"range": span})
            assert (got.status_code, got.content) == (status, body), span
        past = await client.get(f"{files}/{file_id}", headers={"range": "bytes=10-"})
        assert (past.status_code, past.headers["content-range"]) == (416, "bytes */10")
        for headers, status in (
            (_headers(raw, sha="0" * 64), 422),
            (_headers(raw, sha="NOT-HEX"), 400),
            ({**_headers(raw), b"x-file-name": b""}, 400),
            (_headers(raw, "../etc/passwd"), 422),
        ):
            assert (await client.put(files, content=raw, headers=headers)).status_code == status
        big = b"x" * (rest_files.MAX_FILE_BYTES + 1)
        assert_error(
            await client.put(files, content=big, headers=_headers(big)), 413, "payload_too_large"
        )
        message = f"/api/v1/agent/chats/{dev.room}/messages"
        foreign = {"message": {"content": "see", "mentions": [], "attachment_ids": ["nope"]}}
        assert_error(await client.post(message, json=foreign), 422, "validation_error")
    with pytest.raises(NotFoundError):  # not a participant: the id is not confirmed
        async for _ in outsider.rest.agent_api_files.download_agent_chat_file(dev.room, file_id):
            pass
    async with raw_client(emu.rest_url, outsider.agent.key) as client:
        other_room = f"/api/v1/agent/chats/{outsider.room}/files/{file_id}"
        assert_error(await client.get(other_room), 404, "not_found")


async def test_files_and_attachments_survive_a_restart(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    state_file = tmp_path / "state.json"
    first: Emulator = await start_emulator(state_file=state_file)
    dev = await seat(first.rest_url, human_client(first.rest_url), "Dev")
    await with_participants(dev)
    sent = await dev.tools.send_room_file("kept\n", "kept.txt", mentions=["local-user"])
    await first.shutdown(2.0)
    second: Emulator = await start_emulator(state_file=state_file)
    rest = AsyncRestClient(api_key=dev.agent.key, base_url=second.rest_url)
    context = await rest.agent_api_context.get_agent_chat_context(dev.room)
    (message,) = [m for m in context.data if m.attachments]
    assert message.attachments is not None
    assert message.attachments[0].name == "kept.txt"
    chunks = [
        c
        async for c in rest.agent_api_files.download_agent_chat_file(
            dev.room, sent["attachment"]["id"]
        )
    ]
    assert b"".join(chunks) == b"kept\n"
