"""The human API, endpoint by endpoint: happy paths through the real `band_rest` client
(so Fern validates every response shape), refusals through raw HTTP (status + error shape)."""

from __future__ import annotations

import logging

import pytest
from band.client.rest import AsyncRestClient
from band_rest import ChatMessageRequest
from band_rest.human_api_profile import UpdateMyProfileRequestUser
from band_rest.types import ChatMessageRequestMentionsItem

from bandkit.emulator.api import route_template
from bandkit.emulator.server import Emulator
from tests.emulator.support import (
    ROOM,
    add,
    assert_error,
    assert_refuses_wrong_keys,
    create_room,
    raw_client,
    register,
)

HUMAN_ROUTES = [
    ("POST", "/api/v1/me/agents/register"),
    ("GET", "/api/v1/me/agents"),
    ("GET", f"/api/v1/me/agents/{ROOM}"),
    ("DELETE", f"/api/v1/me/agents/{ROOM}"),
    ("POST", "/api/v1/me/chats"),
    ("GET", "/api/v1/me/chats"),
    ("GET", f"/api/v1/me/chats/{ROOM}"),
    ("DELETE", f"/api/v1/me/chats/{ROOM}"),
    ("POST", f"/api/v1/me/chats/{ROOM}/participants"),
    ("GET", f"/api/v1/me/chats/{ROOM}/participants"),
    ("DELETE", f"/api/v1/me/chats/{ROOM}/participants/{ROOM}"),
    ("POST", f"/api/v1/me/chats/{ROOM}/messages"),
    ("GET", f"/api/v1/me/chats/{ROOM}/messages"),
    ("GET", "/api/v1/me/profile"),
    ("PUT", "/api/v1/me/profile"),
    ("POST", "/api/v1/me/chats/bulk-delete"),
    ("POST", "/api/v1/me/agents/bulk-delete"),
    ("GET", f"/api/v1/me/bulk-deletions/{ROOM}"),
]


@pytest.mark.parametrize(("method", "path"), HUMAN_ROUTES)
async def test_every_human_route_refuses_missing_invalid_and_agent_keys(
    emu: Emulator, human: AsyncRestClient, method: str, path: str
) -> None:
    agent = await register(human)
    await assert_refuses_wrong_keys(emu.rest_url, method, path, agent.key)


async def test_register_returns_key_once_and_agent_is_listed(
    emu: Emulator, human: AsyncRestClient
) -> None:
    agent = await register(human, "Lister")
    listed = await human.human_api_agents.list_my_agents(name="list")
    assert [a.id for a in listed.data] == [agent.id]
    assert listed.data[0].is_external is True
    async with raw_client(emu.rest_url) as client:
        got = (await client.get(f"/api/v1/me/agents/{agent.id}")).json()["data"]
        assert got["name"] == "Lister"
        assert agent.key not in (await client.get("/api/v1/me/agents")).text


@pytest.mark.parametrize(
    ("raw", "status", "code", "pointer"),
    [
        (b"{not json", 400, "bad_request", None),
        (b"[1, 2]", 422, "validation_error", "/"),
        (b"", 422, "validation_error", "/agent"),
        (b'{"agent": "x"}', 422, "validation_error", "/agent"),
        (b'{"agent": {"description": "d"}}', 422, "validation_error", "/agent/name"),
        (b'{"agent": {"name": "n"}}', 422, "validation_error", "/agent/description"),
        (b'{"agent": {"name": " ", "description": "d"}}', 422, "validation_error", "/agent/name"),
    ],
)
async def test_register_bad_bodies(
    emu: Emulator, raw: bytes, status: int, code: str, pointer: str | None
) -> None:
    async with raw_client(emu.rest_url) as client:
        response = await client.post("/api/v1/me/agents/register", content=raw)
        error = assert_error(response, status, code)
        if pointer is not None:
            assert pointer in error["details"]
        assert (await client.get("/_emulator/health")).status_code == 200  # still up


async def test_delete_agent_removes_it_from_rooms(emu: Emulator, human: AsyncRestClient) -> None:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    deleted = await human.human_api_agents.delete_my_agent(id=agent.id, force=True)
    assert deleted.data.id == agent.id
    participants = await human.human_api_participants.list_my_chat_participants(chat_id=room)
    assert agent.id not in [p.id for p in participants.data]
    async with raw_client(emu.rest_url) as client:
        assert_error(await client.delete(f"/api/v1/me/agents/{agent.id}"), 404, "not_found")
        assert_error(await client.get(f"/api/v1/me/agents/{agent.id}"), 404, "not_found")
    async with raw_client(emu.rest_url, agent.key) as client:
        assert_error(await client.get("/api/v1/agent/me"), 401, "unauthorized")


async def test_rooms_create_list_get_delete(emu: Emulator, human: AsyncRestClient) -> None:
    room = await create_room(human, "Design review")
    got = await human.human_api_chats.get_my_chat_room(id=room)
    assert got.data.title == "Design review"
    listed = await human.human_api_chats.list_my_chats()
    assert room in [r.id for r in listed.data]
    async with raw_client(emu.rest_url) as client:
        assert (await client.delete(f"/api/v1/me/chats/{room}")).status_code == 204
        assert_error(await client.get(f"/api/v1/me/chats/{room}"), 404, "not_found")
        assert_error(await client.delete(f"/api/v1/me/chats/{room}"), 404, "not_found")
        assert_error(await client.post("/api/v1/me/chats", content=b"{"), 400, "bad_request")
        bad_title = await client.post("/api/v1/me/chats", json={"chat": {"title": 5}})
        assert "/chat/title" in assert_error(bad_title, 422, "validation_error")["details"]


async def test_participants_add_list_remove(emu: Emulator, human: AsyncRestClient) -> None:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    listed = await human.human_api_participants.list_my_chat_participants(chat_id=room)
    by_id = {p.id: p for p in listed.data}
    assert by_id[agent.id].type == "Agent"
    assert by_id[agent.id].role == "member"
    assert {p.type for p in listed.data} == {"User", "Agent"}
    removed = await human.human_api_participants.remove_my_chat_participant(
        chat_id=room, id=agent.id
    )
    assert removed.data.id == agent.id
    owner = next(p.id for p in listed.data if p.type == "User")
    base = f"/api/v1/me/chats/{room}/participants"
    async with raw_client(emu.rest_url) as client:
        assert_error(await client.delete(f"{base}/{agent.id}"), 404, "not_found")
        assert_error(await client.delete(f"{base}/{owner}"), 422, "validation_error")
        unknown = {"participant": {"participant_id": ROOM}}
        assert_error(await client.post(base, json=unknown), 404, "not_found")
        bad_role = {"participant": {"participant_id": agent.id, "role": "king"}}
        assert_error(await client.post(base, json=bad_role), 422, "validation_error")
        assert_error(await client.post(base, json={}), 422, "validation_error")
        ok = {"participant": {"participant_id": agent.id}}
        assert (await client.post(base, json=ok)).status_code == 201
        assert_error(await client.post(base, json=ok), 422, "validation_error")
        missing_room = f"/api/v1/me/chats/{ROOM}/participants"
        assert_error(await client.post(missing_room, json=ok), 404, "not_found")


async def test_post_and_list_messages(emu: Emulator, human: AsyncRestClient) -> None:
    agent = await register(human)
    room = await create_room(human)
    await add(human, room, agent.id)
    for text in ("one", "two", "three"):
        sent = await human.human_api_messages.send_my_chat_message(
            chat_id=room,
            message=ChatMessageRequest(
                content=text,
                mentions=[ChatMessageRequestMentionsItem(id=agent.id, name=agent.name)],
            ),
        )
        assert sent.data.success is True
        assert [r.id for r in sent.data.recipients] == [agent.id]
    listed = await human.human_api_messages.list_my_chat_messages(chat_id=room, limit=2)
    assert [m.content for m in listed.data] == ["three", "two"]
    assert listed.metadata.has_more is True
    status = listed.data[0].metadata
    assert status is not None


async def test_post_message_refusals(emu: Emulator, human: AsyncRestClient) -> None:
    outsider = await register(human, "Outsider")
    room = await create_room(human)
    path = f"/api/v1/me/chats/{room}/messages"
    async with raw_client(emu.rest_url) as client:
        not_in_room = {"message": {"content": "hi", "mentions": [{"id": outsider.id}]}}
        error = assert_error(await client.post(path, json=not_in_room), 422, "validation_error")
        assert error["message"] == "mentioned participant is not in the room"
        no_content = {"message": {"mentions": []}}
        assert_error(await client.post(path, json=no_content), 422, "validation_error")
        bad_mentions = {"message": {"content": "x", "mentions": "all"}}
        assert_error(await client.post(path, json=bad_mentions), 422, "validation_error")
        assert_error(await client.post(path, content=b"nope"), 400, "bad_request")
        ghost = f"/api/v1/me/chats/{ROOM}/messages"
        assert_error(await client.post(ghost, json={"message": {"content": "x"}}), 404, "not_found")
        assert_error(await client.get(ghost), 404, "not_found")
        assert_error(await client.get(f"{path}?limit=zero"), 422, "validation_error")


async def test_profile(human: AsyncRestClient) -> None:
    profile = await human.human_api_profile.get_my_profile()
    assert profile.data.handle
    assert profile.data.role == "user"


async def test_profile_update_renames_the_user_everywhere(
    emu: Emulator, human: AsyncRestClient
) -> None:
    room = await create_room(human)
    updated = await human.human_api_profile.update_my_profile(
        user=UpdateMyProfileRequestUser(first_name=" Ada ", last_name="Lovelace")
    )
    assert (updated.data.first_name, updated.data.last_name) == ("Ada", "Lovelace")
    again = await human.human_api_profile.get_my_profile()
    assert (again.data.first_name, again.data.last_name) == ("Ada", "Lovelace")
    people = await human.human_api_participants.list_my_chat_participants(room)
    assert [p.name for p in people.data] == ["Ada Lovelace"]
    cleared = await human.human_api_profile.update_my_profile(
        user=UpdateMyProfileRequestUser(last_name="")
    )
    assert (cleared.data.first_name, cleared.data.last_name) == ("Ada", None)
    async with raw_client(emu.rest_url) as client:
        for bad in ({"user": {"first_name": "  "}}, {"user": {"last_name": 7}}, {"user": 1}):
            assert_error(await client.put("/api/v1/me/profile", json=bad), 422, "validation_error")


async def test_unknown_routes_404_and_logged_once_per_request(
    emu: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bandkit.emulator")
    async with raw_client(emu.rest_url) as client:
        for _ in range(3):
            assert_error(await client.get("/api/v1/me/nothing-here"), 404, "not_found")
        assert_error(await client.patch("/api/v1/me/profile", json={}), 404, "not_found")
        for n in (ROOM, "1234", "x%C3%A9y"):  # ids become a template; non-ASCII is escaped
            assert_error(await client.post(f"/api/v1/me/things/{n}/poke"), 404, "not_found")
        health = await client.get("/_emulator/health")
    unhandled = [r.getMessage() for r in caplog.records if "UNHANDLED" in r.getMessage()]
    assert unhandled == [
        *["UNHANDLED GET /api/v1/me/nothing-here"] * 3,
        "UNHANDLED PATCH /api/v1/me/profile",
        *["UNHANDLED POST /api/v1/me/things/{id}/poke"] * 2,
        "UNHANDLED POST /api/v1/me/things/x\\xe9y/poke",
    ]
    assert health.json()["data"]["unhandled"] == 7


async def test_bulk_deletions_complete_with_per_id_results(
    emu: Emulator, human: AsyncRestClient
) -> None:
    agent = await register(human)
    keep, drop = await create_room(human, "keep"), await create_room(human, "drop")
    await add(human, drop, agent.id)
    bulk = human.human_api_bulk_deletions
    chats = await bulk.bulk_delete_my_chats(ids=[drop, ROOM])
    assert chats.data.status == "completed"
    assert [(r.id, r.status) for r in chats.data.results] == [(drop, "succeeded"), (ROOM, "failed")]
    assert chats.data.results[1].error is not None
    assert chats.data.results[1].error.code == "not_found"
    shown = await bulk.show_my_bulk_deletion(id=chats.data.id)
    assert shown.data.succeeded == 1
    agents = await bulk.bulk_delete_my_agents(ids=[agent.id], force=True)
    assert agents.data.succeeded == 1
    remaining = await human.human_api_chats.list_my_chats()
    assert [r.id for r in remaining.data] == [keep]
    assert (await human.human_api_agents.list_my_agents()).data == []
    async with raw_client(emu.rest_url) as client:
        path = "/api/v1/me/chats/bulk-delete"
        assert_error(await client.post(path, json={"ids": []}), 422, "validation_error")
        assert_error(await client.post(path, json={"ids": ["x"] * 101}), 422, "validation_error")
        assert_error(await client.get(f"/api/v1/me/bulk-deletions/{ROOM}"), 404, "not_found")


def test_unhandled_paths_are_logged_as_safe_templates() -> None:
    assert route_template(f"/api/v1/agent/memories/{ROOM}/pin") == "/api/v1/agent/memories/{id}/pin"
    assert route_template("/x/\n\x1b[31m/7") == "/x/\\x0a\\x1b[31m/{id}"  # no log injection
    assert len(route_template("/" + "a" * 5000)) == 200
