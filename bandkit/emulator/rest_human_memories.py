"""The user's view of memories (`/api/v1/me/memories...`, user key): what the SDK's human
tools (`band_list_user_memories`, `band_get|supersede|archive|restore|delete_user_memory`)
call (band-client-rest 0.0.46 `UserMemory`).

The emulator's one user owns every agent and belongs to no organization, so it reaches
the memories about itself (`subject_id` = the user) and every agent's `agent`-scoped
private memories; a subject memory about someone else answers 403, an unknown id 404.
`scope` filters `about_me`, `organization` and `room` (memories here carry neither, so
those two are empty) or `all`; the other filters and the paging are the agent API's.
restore works only on an archived memory (422 otherwise); delete is permanent (204).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bandkit.emulator import rest_memories, wire
from bandkit.emulator.api import data, endpoint
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import ApiFailure, invalid, not_found
from bandkit.emulator.state import EmulatorState, Memory

user_api = endpoint(Kind.USER)
USER_SCOPES = ("about_me", "organization", "room", "all")


def _reachable(state: EmulatorState, m: Memory) -> bool:
    return m.scope == "agent" or m.subject_id == state.user.id


def _render(state: EmulatorState, m: Memory) -> dict[str, Any]:
    """`UserMemory`: the agent shape plus display names (null once a referent is gone)."""
    agent = state.agents.get(m.source_agent_id)
    subject_name, subject_type = None, None
    if m.subject_id == state.user.id:
        subject_name, subject_type = wire.user_name(state.user), "user"
    elif m.subject_id is not None and (other := state.agents.get(m.subject_id)) is not None:
        subject_name, subject_type = other.name, "agent"
    return {
        **rest_memories.render(m),
        "source_agent_name": agent.name if agent else None,
        "subject_name": subject_name,
        "subject_type": subject_type,
        "chat_room_id": None,
        "chat_room_title": None,
        "chat_room_status": None,
        "chat_room_type": None,
    }


def _memory(request: Request, platform: Platform) -> Memory:
    memory = platform.state.memories.get(request.path_params["memory_id"])
    if memory is None:
        raise not_found("memory")
    if not _reachable(platform.state, memory):
        raise ApiFailure(403, "forbidden", "this memory is neither about you nor your agent's own")
    return memory


@user_api
async def list_memories(request: Request, platform: Platform, _: Principal) -> Response:
    state, q = platform.state, request.query_params
    scope = q.get("scope") or "all"
    if scope not in USER_SCOPES:
        raise invalid("/scope", f"must be one of {', '.join(USER_SCOPES)}")
    source, room = q.get("source_agent_id"), q.get("chat_room_id")
    candidates = [
        m
        for m in state.memories.values()
        if _reachable(state, m)
        and scope in ("all", "about_me")
        and (scope != "about_me" or m.subject_id == state.user.id)
        and (not source or m.source_agent_id == source)
        and not room  # no memory here belongs to a room
    ]
    found = rest_memories.filtered(request, candidates, check_scope=False)
    return rest_memories.listing(request, found, lambda m: _render(state, m))


@user_api
async def get_memory(request: Request, platform: Platform, _: Principal) -> Response:
    return data(_render(platform.state, _memory(request, platform)))


def _change(request: Request, platform: Platform, status: str) -> Response:
    memory = _memory(request, platform)
    if status == "active" and memory.status != "archived":
        raise invalid(
            "/status", f"only an archived memory can be restored, this one is {memory.status}"
        )
    rest_memories.set_status(platform, memory, status)
    return data(_render(platform.state, memory))


@user_api
async def supersede_memory(request: Request, platform: Platform, _: Principal) -> Response:
    return _change(request, platform, "superseded")


@user_api
async def archive_memory(request: Request, platform: Platform, _: Principal) -> Response:
    return _change(request, platform, "archived")


@user_api
async def restore_memory(request: Request, platform: Platform, _: Principal) -> Response:
    return _change(request, platform, "active")


@user_api
async def delete_memory(request: Request, platform: Platform, _: Principal) -> Response:
    memory = _memory(request, platform)
    del platform.state.memories[memory.id]
    platform.commit()
    return Response(status_code=204)


ME = "/api/v1/me/memories"
ONE = f"{ME}/{{memory_id}}"
ROUTES = [
    Route(ME, list_memories, methods=["GET"]),
    Route(ONE, get_memory, methods=["GET"]),
    Route(ONE, delete_memory, methods=["DELETE"]),
    Route(f"{ONE}/supersede", supersede_memory, methods=["POST"]),
    Route(f"{ONE}/archive", archive_memory, methods=["POST"]),
    Route(f"{ONE}/restore", restore_memory, methods=["POST"]),
]
