"""The human API (`/api/v1/me/...`, user key): agents, rooms, participants, messages, profile."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bandkit.emulator import messages, ops, wire
from bandkit.emulator.api import (
    body,
    data,
    endpoint,
    int_query,
    optional_text,
    paged,
    post_message_in,
    required_text,
)
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import invalid, not_found
from bandkit.emulator.state import Role

human = endpoint(Kind.USER, session=True)


@human
async def register_agent(request: Request, platform: Platform, _: Principal) -> Response:
    fields = await body(request, "agent")
    name = required_text(fields, "name", "/agent")
    description = required_text(fields, "description", "/agent")
    agent, api_key = ops.register_agent(platform.state, name, description, platform.now())
    platform.commit()
    return data(
        {
            "agent": {
                "id": agent.id,
                "name": agent.name,
                "description": agent.description,
                "owner_id": platform.state.user.id,
                "inserted_at": agent.inserted_at,
            },
            "credentials": {"api_key": api_key},
        },
        status=201,
    )


@human
async def list_agents(request: Request, platform: Platform, _: Principal) -> Response:
    name = request.query_params.get("name")
    agents = [
        wire.my_agent(a)
        for a in platform.state.agents.values()
        if not name or name.lower() in a.name.lower()
    ]
    chunk, meta = paged(agents, request)
    meta.update({"available_filters": [], "sortable_fields": []})
    return data(chunk, metadata=meta)


@human
async def get_agent(request: Request, platform: Platform, _: Principal) -> Response:
    agent = platform.state.agents.get(request.path_params["agent_id"])
    if agent is None:
        raise not_found("agent")
    return data(wire.my_agent(agent))


@human
async def delete_agent(request: Request, platform: Platform, _: Principal) -> Response:
    agent_id = request.path_params["agent_id"]
    agent, outcome = ops.delete_agent(platform.state, agent_id, platform.now())
    platform.commit(outcome)
    platform.broker.close_agent(agent_id, 1008, "agent deleted")
    return data(
        {
            "id": agent.id,
            "name": agent.name,
            "description": agent.description,
            "executions_deleted": 0,
        }
    )


@human
async def create_room(request: Request, platform: Platform, _: Principal) -> Response:
    fields = await body(request, "chat")
    title = optional_text(fields, "title", "/chat")
    task_id = optional_text(fields, "task_id", "/chat")
    room, outcome = ops.create_room(platform.state, title, task_id, platform.now())
    platform.commit(outcome)
    return data(wire.me_room(platform.state, room), status=201)


@human
async def list_rooms(request: Request, platform: Platform, _: Principal) -> Response:
    rooms = [wire.me_room(platform.state, r) for r in platform.state.rooms.values()]
    chunk, meta = paged(rooms, request)
    return data(chunk, metadata=meta)


@human
async def get_room(request: Request, platform: Platform, _: Principal) -> Response:
    room = ops.get_room(platform.state, request.path_params["room_id"])
    return data(wire.me_room(platform.state, room))


@human
async def delete_room(request: Request, platform: Platform, _: Principal) -> Response:
    platform.commit(ops.delete_room(platform.state, request.path_params["room_id"]))
    return Response(status_code=204)


@human
async def add_participant(request: Request, platform: Platform, _: Principal) -> Response:
    room_id = request.path_params["room_id"]
    ops.get_room(platform.state, room_id)
    fields = await body(request, "participant")
    participant_id = required_text(fields, "participant_id", "/participant")
    raw_role = fields.get("role") or Role.MEMBER.value
    try:
        role = Role(raw_role)
    except ValueError:
        raise invalid("/participant/role", "must be one of owner, admin, member") from None
    added, outcome = ops.add_participant(
        platform.state, room_id, participant_id, role, platform.now()
    )
    platform.commit(outcome)
    return data(wire.participant(platform.state, added), status=201)


@human
async def list_participants(request: Request, platform: Platform, _who: Principal) -> Response:
    room = ops.get_room(platform.state, request.path_params["room_id"])
    people = [
        wire.participant_details(
            platform.state, member, online=platform.broker.is_online(member.id)
        )
        for member in room.participants.values()
    ]
    chunk, meta = paged(people, request)
    return data(chunk, metadata=meta)


@human
async def remove_participant(request: Request, platform: Platform, _: Principal) -> Response:
    room_id, pid = request.path_params["room_id"], request.path_params["participant_id"]
    state = platform.state
    room = ops.get_room(state, room_id)
    existing = room.participants.get(pid)
    rendered = wire.participant(state, existing) if existing is not None else None
    _removed, outcome = ops.remove_participant(state, room_id, pid, platform.now())
    platform.commit(outcome)
    return data(rendered)


@human
async def post_message(request: Request, platform: Platform, principal: Principal) -> Response:
    room = ops.get_room(platform.state, request.path_params["room_id"])
    return await post_message_in(request, platform, principal, room)


@human
async def list_messages(request: Request, platform: Platform, _: Principal) -> Response:
    room = ops.get_room(platform.state, request.path_params["room_id"])
    limit = int_query(request, "limit", 50, hi=500)
    since = request.query_params.get("since")
    kind = request.query_params.get("message_type")
    matching = [
        m
        for m in messages.room_messages(platform.state, room.id)
        if (not kind or m.message_type == kind) and (not since or m.inserted_at > since)
    ]
    newest_first = [wire.message(m) for m in reversed(matching)]
    return data(
        newest_first[:limit],
        metadata={"has_more": len(newest_first) > limit, "limit": limit},
    )


@human
async def profile(request: Request, platform: Platform, _: Principal) -> Response:
    return data(wire.user_details(platform.state.user))


@human
async def update_profile(request: Request, platform: Platform, _: Principal) -> Response:
    """`PUT /me/profile` with `{"user": {first_name?, last_name?}}`: blank first name is 422."""
    fields = await body(request, "user")
    user = platform.state.user
    if "first_name" in fields:
        user.name = required_text(fields, "first_name", "/user").strip()
    if "last_name" in fields:
        last = optional_text(fields, "last_name", "/user")
        user.last_name = last.strip() if last and last.strip() else None
    platform.commit()
    return data(wire.user_details(user))


ME = "/api/v1/me"
ROUTES = [
    Route(f"{ME}/agents/register", register_agent, methods=["POST"]),
    Route(f"{ME}/agents", list_agents, methods=["GET"]),
    Route(f"{ME}/agents/{{agent_id}}", get_agent, methods=["GET"]),
    Route(f"{ME}/agents/{{agent_id}}", delete_agent, methods=["DELETE"]),
    Route(f"{ME}/chats", create_room, methods=["POST"]),
    Route(f"{ME}/chats", list_rooms, methods=["GET"]),
    Route(f"{ME}/chats/{{room_id}}", get_room, methods=["GET"]),
    Route(f"{ME}/chats/{{room_id}}", delete_room, methods=["DELETE"]),
    Route(f"{ME}/chats/{{room_id}}/participants", add_participant, methods=["POST"]),
    Route(f"{ME}/chats/{{room_id}}/participants", list_participants, methods=["GET"]),
    Route(
        f"{ME}/chats/{{room_id}}/participants/{{participant_id}}",
        remove_participant,
        methods=["DELETE"],
    ),
    Route(f"{ME}/chats/{{room_id}}/messages", post_message, methods=["POST"]),
    Route(f"{ME}/chats/{{room_id}}/messages", list_messages, methods=["GET"]),
    Route(f"{ME}/profile", profile, methods=["GET"]),
    Route(f"{ME}/profile", update_profile, methods=["PUT"]),
]
