"""The agent API (`/api/v1/agent/...`, agent keys): what a running `band.Agent` calls.

Lifecycle semantics (see `messages.mark_processing` / `messages.settle`): `processing` opens an
attempt (200), `processed`/`failed` close it (200) or answer 422 with
`/processing_attempt` when none is open; both answer 204 while the agent's execution in
that room is stopped. `messages/next` answers 204 when nothing is pending. A delivery
gets at most `Platform.max_attempts` processing attempts (`messages.py`); a claim past
the cap answers 422 and the message is failed for good.
"""

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
    paged,
    post_message_in,
    required_text,
)
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import invalid
from bandkit.emulator.state import Delivery, DeliveryStatus, Room

agent_api = endpoint(Kind.AGENT)


def _room(request: Request, platform: Platform, principal: Principal) -> Room:
    return ops.room_for_agent(platform.state, request.path_params["room_id"], principal.id)


def _stopped(platform: Platform, principal: Principal, room: Room) -> bool:
    """Whether `agent.control stop` halted this agent's execution in this room."""
    return (principal.id, room.id) in platform.stopped


@agent_api
async def me(request: Request, platform: Platform, principal: Principal) -> Response:
    agent = platform.state.agents[principal.id]
    return data(wire.agent_me(agent, platform.state.user.id))


@agent_api
async def list_chats(request: Request, platform: Platform, principal: Principal) -> Response:
    rooms = [wire.room(r) for r in platform.state.rooms.values() if principal.id in r.participants]
    chunk, meta = paged(rooms, request)
    return data(chunk, metadata=meta)


@agent_api
async def get_chat(request: Request, platform: Platform, principal: Principal) -> Response:
    return data(wire.room(_room(request, platform, principal)))


@agent_api
async def participants(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    return data([wire.participant(platform.state, p) for p in room.participants.values()])


@agent_api
async def context(request: Request, platform: Platform, principal: Principal) -> Response:
    """The room's history as this agent sees it: text messages plus its own events."""
    room = _room(request, platform, principal)
    limit = int_query(request, "limit", 100, hi=500)
    visible = [
        m
        for m in messages.room_messages(platform.state, room.id)
        if m.message_type == "text" or m.sender_id == principal.id
    ]
    window = visible[-limit:]
    return data(
        [wire.message(m) for m in window],
        metadata={"has_more": len(visible) > limit, "limit": limit},
    )


def _wanted(status_filter: str | None, delivery: Delivery) -> bool:
    """No filter: outstanding deliveries (what the SDK's recovery scan expects)."""
    if not status_filter:
        return wire.is_outstanding(delivery)
    return status_filter == "all" or delivery.status.value == status_filter


@agent_api
async def list_messages(request: Request, platform: Platform, principal: Principal) -> Response:
    """Messages addressed to this agent: outstanding ones, or those with `status`."""
    room = _room(request, platform, principal)
    status = request.query_params.get("status")
    if status not in (None, "", "all", *(s.value for s in DeliveryStatus)):
        raise invalid("/status", "must be delivered, processing, processed, failed or all")
    order = request.query_params.get("sort_order") or "asc"
    if order not in ("asc", "desc"):
        raise invalid("/sort_order", "must be asc or desc")
    mine = [
        m
        for m in messages.room_messages(platform.state, room.id)
        if (d := m.deliveries.get(principal.id)) is not None and _wanted(status, d)
    ]
    if order == "desc":
        mine.reverse()
    if "page" in request.query_params:
        chunk, meta = paged([wire.message(m) for m in mine], request, default_size=50)
        return data(chunk, metadata=meta)
    limit = int_query(request, "limit", 50, hi=100)
    cursor = request.query_params.get("cursor")
    if cursor:
        try:
            after = int(cursor)
        except ValueError:
            raise invalid("/cursor", "is not a cursor this server issued") from None
        mine = [m for m in mine if (m.seq > after if order == "asc" else m.seq < after)]
    page = mine[:limit]
    cursor_meta: dict[str, object] = {"has_more": len(mine) > limit, "limit": limit}
    if len(mine) > limit:
        cursor_meta["next_cursor"] = str(page[-1].seq)
    if status:
        cursor_meta["status_filter"] = status
    return data([wire.message(m) for m in page], metadata=cursor_meta)


@agent_api
async def next_message(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    message = messages.next_message(platform.state, room, principal.id)
    if message is None:
        return Response(status_code=204)
    return data(wire.message(message))


@agent_api
async def processing(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    if _stopped(platform, principal, room):
        return Response(status_code=204)
    message_id = request.path_params["message_id"]
    message, outcome = messages.mark_processing(
        platform.state, room, message_id, principal.id, platform.now(), platform.max_attempts
    )
    platform.commit(outcome)
    if message.deliveries[principal.id].given_up:
        raise messages.cap_refusal()
    return data(wire.status_response(message, principal.id))


@agent_api
async def processed(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    if _stopped(platform, principal, room):
        return Response(status_code=204)
    message, outcome = messages.settle(
        platform.state,
        room,
        request.path_params["message_id"],
        principal.id,
        DeliveryStatus.PROCESSED,
        platform.now(),
    )
    platform.commit(outcome)
    return data(wire.status_response(message, principal.id))


@agent_api
async def failed(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    if _stopped(platform, principal, room):
        return Response(status_code=204)
    fields = await body(request)
    error = fields.get("error")
    if error is not None and not isinstance(error, str):
        raise invalid("/error", "must be a string")
    message, outcome = messages.settle(
        platform.state,
        room,
        request.path_params["message_id"],
        principal.id,
        DeliveryStatus.FAILED,
        platform.now(),
        error=error,
        max_attempts=platform.max_attempts,
    )
    platform.commit(outcome)
    return data(wire.status_response(message, principal.id))


@agent_api
async def activity(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    fields = await body(request)
    working = fields.get("working")
    if not isinstance(working, bool):
        raise invalid("/working", "is required and must be a boolean")
    if _stopped(platform, principal, room):
        working = False  # echoing false to a true tells the SDK the room is stopped
    detail = fields.get("activity")
    agent = platform.state.agents[principal.id]
    payload = {"agent_id": agent.id, "name": agent.name, "working": working, "activity": detail}
    platform.broker.publish(
        [
            ops.Push(
                ops.chat_room_topic(room.id),
                "agent_activity",
                payload,
                users=False,
                agents=frozenset(),
                page_room=room.id,
            )
        ]
    )
    return data({"working": working})


@agent_api
async def post_message(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    return await post_message_in(request, platform, principal, room)


@agent_api
async def post_event(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    fields = await body(request, "event")
    content = required_text(fields, "content", "/event")
    message_type = required_text(fields, "message_type", "/event")
    if message_type not in messages.EVENT_TYPES:
        raise invalid(
            "/event/message_type", f"must be one of {', '.join(sorted(messages.EVENT_TYPES))}"
        )
    metadata = fields.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise invalid("/event/metadata", "must be an object")
    message, outcome = messages.post_event(
        platform.state, room, principal.id, content, message_type, metadata, platform.now()
    )
    platform.commit(outcome)
    return data({"id": message.id, "message_type": message_type, "success": True}, status=201)


AG = "/api/v1/agent"
CHAT = f"{AG}/chats/{{room_id}}"
MSG = f"{CHAT}/messages/{{message_id}}"
ROUTES = [
    Route(f"{AG}/me", me, methods=["GET"]),
    Route(f"{AG}/chats", list_chats, methods=["GET"]),
    Route(CHAT, get_chat, methods=["GET"]),
    Route(f"{CHAT}/participants", participants, methods=["GET"]),
    Route(f"{CHAT}/context", context, methods=["GET"]),
    Route(f"{CHAT}/messages/next", next_message, methods=["GET"]),
    Route(f"{CHAT}/messages", list_messages, methods=["GET"]),
    Route(f"{CHAT}/messages", post_message, methods=["POST"]),
    Route(f"{MSG}/processing", processing, methods=["POST"]),
    Route(f"{MSG}/processed", processed, methods=["POST"]),
    Route(f"{MSG}/failed", failed, methods=["POST"]),
    Route(f"{CHAT}/activity", activity, methods=["POST"]),
    Route(f"{CHAT}/events", post_event, methods=["POST"]),
]
