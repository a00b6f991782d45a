"""A room's task board and goal through the SDK's task tools (`AgentTools`) and band_rest."""

from __future__ import annotations

import pytest
from band.client.rest import AsyncRestClient
from band.core.task_types import TaskAssignmentStatus as Status
from band.core.task_types import TaskLifecycleState as Lifecycle
from band.core.task_types import TaskListState
from band_rest.errors import NotFoundError, UnprocessableEntityError

from bandkit.emulator.server import Emulator
from tests.emulator.support import (
    ROOM,
    USER_KEY,
    assert_error,
    assert_refuses_wrong_keys,
    create_room,
    raw_client,
    seat,
)

pytestmark = pytest.mark.usefixtures("no_unhandled")

CHAT = f"/api/v1/agent/chats/{ROOM}"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"{CHAT}/tasks"),
        ("POST", f"{CHAT}/tasks"),
        ("GET", f"{CHAT}/tasks/1"),
        ("POST", f"{CHAT}/tasks/1"),
        ("GET", f"{CHAT}/tasks/1/history"),
        ("GET", f"{CHAT}/board"),
        ("PUT", f"{CHAT}/board"),
    ],
)
async def test_task_routes_refuse_wrong_keys(emu: Emulator, method: str, path: str) -> None:
    await assert_refuses_wrong_keys(emu.rest_url, method, path, USER_KEY)


async def test_create_join_finish_and_tidy_through_the_sdk_tools(
    emu: Emulator, human: AsyncRestClient
) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    dev = await seat(emu.rest_url, human, "Dev", room=pm.room)
    created = await pm.tools.execute_tool_call(
        "band_create_task", {"subject": "write the parser", "detail": "JSON in, AST out"}
    )
    assert isinstance(created, dict), created
    assert (created["number"], created["state"], created["overall_status"]) == (
        1,
        "active",
        "pending",
    )
    assert created["assignments"] == []  # the creator is not assigned
    task_id = created["id"]

    joined = await dev.tools.update_task(
        "1", status=Status.IN_PROGRESS, active_form="reading the spec"
    )
    assert joined.overall_status == "in_progress"
    (mine,) = joined.assignments
    assert (mine.assignee.id, mine.assignee.handle, mine.active_form) == (
        dev.agent.id,
        "dev",
        "reading the spec",
    )
    await pm.tools.update_task(
        task_id, comment="ping me when done", subject="write the JSON parser"
    )
    done = await dev.tools.update_task(task_id, status=Status.COMPLETED, state=Lifecycle.ARCHIVED)
    assert (done.state, done.overall_status) == ("archived", "completed")

    assert (await pm.tools.list_tasks()).data == []  # active only by default
    archived = await pm.tools.list_tasks(state=TaskListState.ARCHIVED)
    assert [t.id for t in archived.data] == [task_id]
    detailed = await pm.tools.get_task("#1", include="history")  # the SDK sends "1"
    events = [e.event for e in detailed.history or []]
    assert events == [
        "created",
        "status_changed",
        "edited",
        "commented",
        "status_changed",
        "archived",
    ]
    assert detailed.history_truncated is False
    edited = next(e for e in detailed.history or [] if e.event == "edited")
    assert edited.payload["subject"] == {"from": "write the parser", "to": "write the JSON parser"}

    with pytest.raises(UnprocessableEntityError):  # work on an archived task
        await dev.tools.update_task(task_id, status=Status.IN_PROGRESS)
    restored = await dev.tools.update_task(task_id, state=Lifecycle.ACTIVE, status=Status.IN_REVIEW)
    assert (restored.state, restored.overall_status) == ("active", "in_review")


async def test_supersede_history_paging_and_refusals(emu: Emulator, human: AsyncRestClient) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    old = await pm.tools.create_task("v1 of the plan")
    new = await pm.tools.create_task("v2 of the plan", supersedes_id="1")
    assert new.number == 2
    gone = await pm.tools.get_task(old.id)
    assert (gone.state, gone.superseded_by_id) == ("superseded", new.id)
    for n in range(4):
        await pm.tools.update_task("2", comment=f"note {n}")
    first = await pm.tools.get_task_history("2", limit=3)
    assert first.metadata.has_more
    assert first.metadata.next_cursor
    rest = await pm.rest.agent_api_chat_tasks.get_chat_task_history(
        pm.room, "2", cursor=first.metadata.next_cursor
    )
    assert [e.event for e in first.data + rest.data] == ["created", *["commented"] * 4]
    assert rest.metadata.has_more is False

    with pytest.raises(NotFoundError):
        await pm.tools.get_task("99")
    async with raw_client(emu.rest_url, pm.agent.key) as client:
        tasks = f"/api/v1/agent/chats/{pm.room}/tasks"
        for bad in (
            {"subject": " "},
            {"subject": "x", "supersedes_id": "1"},
            {"detail": "no subject"},
        ):
            assert_error(await client.post(tasks, json=bad), 422, "validation_error")
        for bad in ({}, {"status": "done"}, {"active_form": "lurking"}, {"state": "deleted"}):
            assert_error(await client.post(f"{tasks}/2", json=bad), 422, "validation_error")
        elsewhere = await create_room(human, "not joined")
        hidden = await client.get(f"/api/v1/agent/chats/{elsewhere}/tasks")
        assert_error(hidden, 404, "not_found")


async def test_the_room_goal(emu: Emulator, human: AsyncRestClient) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    dev = await seat(emu.rest_url, human, "Dev", room=pm.room)
    empty = await pm.tools.get_board()
    assert (empty.chat_room_id, empty.goal_title) == (pm.room, None)
    set_ = await pm.tools.execute_tool_call(
        "band_set_board", {"goal_title": "Ship 1.0", "goal_summary": "by Friday"}
    )
    assert isinstance(set_, dict), set_
    assert set_["goal_title"] == "Ship 1.0"
    await dev.tools.set_board(goal_summary="by Monday")
    board = await pm.tools.get_board(include="history")
    assert (board.goal_title, board.goal_summary) == ("Ship 1.0", "by Monday")
    assert board.created_by is not None
    assert board.created_by.id == pm.agent.id
    assert board.updated_by is not None
    assert board.updated_by.id == dev.agent.id
    history = board.history or []
    assert [e.event for e in history] == ["goal_set", "goal_edited"]
    assert history[1].payload == {"goal_summary": {"from": "by Friday", "to": "by Monday"}}
    async with raw_client(emu.rest_url, pm.agent.key) as client:
        path = f"/api/v1/agent/chats/{pm.room}/board"
        assert_error(await client.put(path, json={}), 422, "validation_error")
        outsider = await seat(emu.rest_url, human, "Outsider")
    with pytest.raises(NotFoundError):
        await outsider.rest.agent_api_chat_tasks.get_chat_board(pm.room)
