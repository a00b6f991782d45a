"""A room's shared task board and goal (`/api/v1/agent/chats/{room}/tasks|board`).

What `AgentTools.list_tasks|create_task|get_task|update_task|get_task_history|get_board|
set_board` call (band-client-rest 0.0.46 `Task`, `TaskEvent`, `Board`). Only the room's
participants reach it (404 for any other room). Rules from the Fern docstrings:
- create: the server numbers tasks per room (#1, #2, ...); the creator is not assigned;
  `supersedes_id` (UUID or number of an active task) marks that one `superseded`.
- update: at least one field; `status` is the caller's own work status and its first
  write joins the caller (`active_form`/`linked_native_id` need that); work fields need
  an active task, except that `state: "active"` restores an archived task first and
  `cancelled`/`archived` apply after them (finish-and-tidy in one call).
- tasks and the goal read by UUID or board number; `include=history` embeds the latest
  `HISTORY_EMBED` events with `history_truncated`; history pages by `cursor`+`limit`.
Limits: `MAX_TASKS_PER_ROOM` tasks, `MAX_EVENTS` history events per task or goal (422
beyond), subjects and titles `MAX_SUBJECT` characters, other text `MAX_TEXT`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bandkit.emulator import ops, tasks_model
from bandkit.emulator.api import body, data, endpoint, int_query
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import invalid
from bandkit.emulator.state import Room
from bandkit.emulator.tasks_model import STATES

agent_api = endpoint(Kind.AGENT)


def _room(request: Request, platform: Platform, principal: Principal) -> Room:
    return ops.room_for_agent(platform.state, request.path_params["room_id"], principal.id)


def _with_history(request: Request) -> bool:
    include = request.query_params.get("include")
    if include not in (None, "", "history"):
        raise invalid("/include", "must be history")
    return include == "history"


def _page(request: Request, items: list[Any], key: str) -> tuple[list[Any], dict[str, Any]]:
    """Cursor paging over `items` in order; the cursor is the last item's `key` value."""
    limit = int_query(request, "limit", 50, hi=100)
    cursor = request.query_params.get("cursor")
    if cursor:
        keys = [str(item[key]) for item in items]
        if cursor not in keys:
            raise invalid("/cursor", "is not a cursor this server issued")
        items = items[keys.index(cursor) + 1 :]
    chunk = items[:limit]
    meta: dict[str, Any] = {"has_more": len(items) > limit, "limit": limit}
    if len(items) > limit:
        meta["next_cursor"] = str(chunk[-1][key])
    return chunk, meta


@agent_api
async def list_tasks(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    state = request.query_params.get("state") or "active"
    if state not in (*STATES, "all"):
        raise invalid("/state", f"must be one of {', '.join((*STATES, 'all'))}")
    tasks = sorted(platform.state.tasks.get(room.id, {}).values(), key=lambda t: t.number)
    shown = [
        tasks_model.render(platform.state, t, history=False)
        for t in tasks
        if state in ("all", t.state)
    ]
    chunk, meta = _page(request, shown, "number")
    return data(chunk, metadata=meta)


@agent_api
async def create_task(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    fields = await body(request)
    task = tasks_model.create(platform.state, room, principal.id, fields, platform.now())
    platform.commit()
    return data(tasks_model.render(platform.state, task, history=False), status=201)


@agent_api
async def get_task(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    task = tasks_model.find(platform.state, room.id, request.path_params["task_id"])
    return data(tasks_model.render(platform.state, task, history=_with_history(request)))


@agent_api
async def update_task(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    task = tasks_model.find(platform.state, room.id, request.path_params["task_id"])
    fields = await body(request)
    tasks_model.update(platform.state, task, principal.id, fields, platform.now())
    platform.commit()
    return data(tasks_model.render(platform.state, task, history=False))


@agent_api
async def task_history(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    task = tasks_model.find(platform.state, room.id, request.path_params["task_id"])
    events = [{**tasks_model.event(platform.state, e), "_n": n} for n, e in enumerate(task.history)]
    chunk, meta = _page(request, events, "_n")
    for item in chunk:
        item.pop("_n")
    return data(chunk, metadata=meta)


@agent_api
async def get_board(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    history = _with_history(request)
    return data(tasks_model.render_board(platform.state, room.id, history=history))


@agent_api
async def put_board(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    fields = await body(request)
    tasks_model.set_goal(platform.state, room.id, principal.id, fields, platform.now())
    platform.commit()
    return data(tasks_model.render_board(platform.state, room.id, history=False))


CHAT = "/api/v1/agent/chats/{room_id}"
TASK = f"{CHAT}/tasks/{{task_id}}"
ROUTES = [
    Route(f"{CHAT}/tasks", list_tasks, methods=["GET"]),
    Route(f"{CHAT}/tasks", create_task, methods=["POST"]),
    Route(TASK, get_task, methods=["GET"]),
    Route(TASK, update_task, methods=["POST"]),
    Route(f"{TASK}/history", task_history, methods=["GET"]),
    Route(f"{CHAT}/board", get_board, methods=["GET"]),
    Route(f"{CHAT}/board", put_board, methods=["PUT"]),
]
