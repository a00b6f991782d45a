"""The agent API's room management: create and rename rooms, recruit and remove peers.

What `band.runtime.tools.AgentTools` calls (`create_chatroom`, `add_participant`,
`remove_participant`, `lookup_peers`) and the Fern `agent_api_chats.rename_agent_chat`.
Permission rules follow the Fern docstrings of band-client-rest 0.0.46:
- create: the acting agent becomes the room's owner; the user is not a participant.
- rename: owner only (403 for another participant, 404 for a room it is not in).
- add: any participant may add a sibling agent or the user (the agent's owner), as a
  `member` only: an agent cannot hand out `owner` or `admin` (403), whatever its own role,
  so a recruited agent can never outrank the room's owner or remove people.
- remove: the acting agent must be the room's owner or admin (403 otherwise); the
  owner itself cannot be removed (403: the Fern spec lists only 401/403/404 here).
Rooms an agent is not in answer 404 everywhere (existence hiding, as in `rest_agent`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bandkit.emulator import ops, wire
from bandkit.emulator.api import body, data, endpoint, optional_text, paged, required_text
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import ApiFailure, invalid, not_found
from bandkit.emulator.state import Role, Room

agent_api = endpoint(Kind.AGENT)
TITLE_MAX = 120
FORBIDDEN_IN_TITLE = ("\n", "\r", "\x00")


def clean_title(raw: str | None, pointer: str, *, required: bool) -> str | None:
    """Trimmed title: 1..120 chars, no newline/CR/NUL (422); blank is None unless required."""
    if raw is None or not raw.strip():
        if required:
            raise invalid(pointer, "can't be blank")
        return None
    if any(c in raw for c in FORBIDDEN_IN_TITLE):
        raise invalid(pointer, "must not contain newline, carriage return or null characters")
    title = raw.strip()
    if len(title) > TITLE_MAX:
        raise invalid(pointer, f"should be at most {TITLE_MAX} character(s)")
    return title


def _room(request: Request, platform: Platform, principal: Principal) -> Room:
    return ops.room_for_agent(platform.state, request.path_params["room_id"], principal.id)


def _require_role(room: Room, principal: Principal, roles: tuple[Role, ...], doing: str) -> None:
    if room.participants[principal.id].role not in roles:
        allowed = " or ".join(r.value for r in roles)
        raise ApiFailure(403, "forbidden", f"only the room's {allowed} can {doing}")


@agent_api
async def create_chat(request: Request, platform: Platform, principal: Principal) -> Response:
    fields = await body(request, "chat")
    title = clean_title(optional_text(fields, "title", "/chat"), "/chat/title", required=False)
    task_id = optional_text(fields, "task_id", "/chat")
    room, outcome = ops.create_room(
        platform.state, title, task_id, platform.now(), owner_agent=principal.id
    )
    platform.commit(outcome)
    return data(wire.room(room), status=201)


@agent_api
async def rename_chat(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    fields = await body(request, "chat")
    raw = optional_text(fields, "title", "/chat")
    title = clean_title(raw, "/chat/title", required=True)
    _require_role(room, principal, (Role.OWNER,), "rename it")
    if room.title != title:
        room.title = title
        room.updated_at = platform.now()
        platform.commit()
    return data(wire.room(room))


@agent_api
async def add_participant(request: Request, platform: Platform, principal: Principal) -> Response:
    room = _room(request, platform, principal)
    fields = await body(request, "participant")
    participant_id = required_text(fields, "participant_id", "/participant")
    try:
        role = Role(fields.get("role") or Role.MEMBER.value)
    except ValueError:
        raise invalid("/participant/role", "must be one of owner, admin, member") from None
    if role is not Role.MEMBER:
        raise ApiFailure(403, "forbidden", f"an agent can add participants as member, not {role}")
    added, outcome = ops.add_participant(
        platform.state, room.id, participant_id, role, platform.now()
    )
    platform.commit(outcome)
    return data(wire.participant(platform.state, added), status=201)


@agent_api
async def remove_participant(
    request: Request, platform: Platform, principal: Principal
) -> Response:
    room = _room(request, platform, principal)
    _require_role(room, principal, (Role.OWNER, Role.ADMIN), "remove participants")
    existing = room.participants.get(request.path_params["participant_id"])
    if existing is None:
        raise not_found("participant")
    if existing.role is Role.OWNER:  # the Fern spec lists 401/403/404 only for this call
        raise ApiFailure(403, "forbidden", "the room owner cannot be removed")
    rendered = wire.participant(platform.state, existing)
    _, outcome = ops.remove_participant(platform.state, room.id, existing.id, platform.now())
    platform.commit(outcome)
    return data(rendered)


@agent_api
async def peers(request: Request, platform: Platform, principal: Principal) -> Response:
    """Sibling agents (every emulator agent has the one user as owner), minus self.

    `not_in_chat` drops the members of that room, but only of a room the caller is in:
    for any other id it filters nothing, so membership of foreign rooms stays hidden.
    """
    state = platform.state
    excluded = {principal.id}
    room = state.rooms.get(request.query_params.get("not_in_chat") or "")
    if room is not None and principal.id in room.participants:
        excluded |= set(room.participants)
    found = [
        wire.peer(a, online=platform.broker.is_online(a.id))
        for a in state.agents.values()
        if a.id not in excluded
    ]
    chunk, meta = paged(found, request, default_size=50)
    return data(chunk, metadata=meta)


AG = "/api/v1/agent"
CHAT = f"{AG}/chats/{{room_id}}"
ROUTES = [
    Route(f"{AG}/chats", create_chat, methods=["POST"]),
    Route(CHAT, rename_chat, methods=["PATCH"]),
    Route(f"{CHAT}/participants", add_participant, methods=["POST"]),
    Route(f"{CHAT}/participants/{{participant_id}}", remove_participant, methods=["DELETE"]),
    Route(f"{AG}/peers", peers, methods=["GET"]),
]
