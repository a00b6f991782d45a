"""Agent contacts (`/api/v1/agent/contacts...`) and the delegation token exchange.

What `AgentTools.list_contacts|add_contact|remove_contact|list_contact_requests|
respond_contact_request` call (band-client-rest 0.0.46). Parties are the emulator's
agents and its one user, found by handle (`@` optional). Rules from the Fern docstrings:
- add: yourself is 400, an unknown handle 404, an existing contact or a pending request
  you already sent 409; an inverse pending request is approved at once (`approved`),
  otherwise a request is created (`pending`).
- respond: `approve`/`reject` a request you received (handle = requester), `cancel` one
  you sent (handle = recipient), or name it by `request_id`; the wrong direction is 403,
  a request no longer pending 409, none found 404.
- remove: by handle, contact record id or the contact's id; both directions go.
- lists: a contact's `id` is the other party's id; received requests are pending only,
  sent ones filter by `sent_status` (default pending); pages per direction.
No `agent_contacts:*` pushes are sent (the SDK's contact handling is off by default).
Limits: `MAX_CONTACTS` relationships and `MAX_REQUESTS` requests per party (422 beyond),
messages `MAX_MESSAGE` characters.

Delegation (`POST /delegation/token`): every agent here has the one user as its owner,
so no message ever crosses an ownership boundary; after the same fail-closed checks as
the platform (a message delivered to, so mentioning, the caller) the answer is 403
`no_delegation`, never a token.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bandkit.emulator import ops, wire
from bandkit.emulator.api import body, data, endpoint, int_query, optional_text, required_text
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import ApiFailure, invalid, not_found
from bandkit.emulator.state import Contact, ContactRequest, EmulatorState

agent_api = endpoint(Kind.AGENT)
MAX_CONTACTS = 500
MAX_REQUESTS = 500
MAX_MESSAGE = 1000
SENT_STATUSES = ("pending", "approved", "rejected", "cancelled", "all")
ACTIONS = ("approve", "reject", "cancel")


def _party(state: EmulatorState, party_id: str) -> dict[str, Any]:
    if party_id == state.user.id:
        u = state.user
        return {"id": u.id, "name": wire.user_name(u), "handle": u.handle, "type": "User"}
    agent = state.agents[party_id]
    return {
        "id": agent.id,
        "name": agent.name,
        "handle": agent.handle,
        "type": "Agent",
        "description": agent.description,
    }


def _by_handle(state: EmulatorState, handle: str) -> str:
    wanted = handle.strip().lstrip("@").casefold()
    if wanted == state.user.handle.casefold():
        return state.user.id
    for agent in state.agents.values():
        if agent.handle.casefold() == wanted:
            return agent.id
    raise not_found("handle")


def _contact_between(state: EmulatorState, x: str, y: str) -> Contact | None:
    return next((c for c in state.contacts.values() if {c.a, c.b} == {x, y}), None)


def _paging(request: Request) -> tuple[int, int]:
    return int_query(request, "page", 1, hi=1_000_000), int_query(request, "page_size", 50, hi=100)


@agent_api
async def list_contacts(request: Request, platform: Platform, principal: Principal) -> Response:
    state, me = platform.state, principal.id
    page, size = _paging(request)
    mine = [c for c in state.contacts.values() if me in (c.a, c.b)]
    rows = []
    for c in mine[(page - 1) * size : page * size]:
        other = c.b if c.a == me else c.a
        party = _party(state, other)
        online = platform.broker.is_online(other) if party["type"] == "Agent" else False
        rows.append({**party, "online": online, "is_external": False, "inserted_at": c.inserted_at})
    pages = max(1, -(-len(mine) // size))
    meta = {"page": page, "page_size": size, "total_count": len(mine), "total_pages": pages}
    return data(rows, metadata=meta)


@agent_api
async def list_requests(request: Request, platform: Platform, principal: Principal) -> Response:
    state, me = platform.state, principal.id
    page, size = _paging(request)
    sent_status = request.query_params.get("sent_status") or "pending"
    if sent_status not in SENT_STATUSES:
        raise invalid("/sent_status", f"must be one of {', '.join(SENT_STATUSES)}")
    received = [
        r for r in state.contact_requests.values() if r.to_id == me and r.status == "pending"
    ]
    sent = [
        r
        for r in state.contact_requests.values()
        if r.from_id == me and sent_status in ("all", r.status)
    ]

    def row(r: ContactRequest, prefix: str, other: str) -> dict[str, Any]:
        party = _party(state, other)
        return {
            "id": r.id,
            "status": r.status,
            "message": r.message,
            "inserted_at": r.inserted_at,
            f"{prefix}_handle": party["handle"],
            f"{prefix}_name": party["name"],
        }

    def window(items: list[ContactRequest]) -> list[ContactRequest]:
        return items[(page - 1) * size : page * size]

    def totals(items: list[ContactRequest]) -> dict[str, int]:
        return {"total": len(items), "total_pages": -(-len(items) // size)}

    return data(
        {
            "received": [row(r, "from", r.from_id) for r in window(received)],
            "sent": [row(r, "to", r.to_id) for r in window(sent)],
        },
        metadata={
            "page": page,
            "page_size": size,
            "received": totals(received),
            "sent": totals(sent),
        },
    )


def _approve(state: EmulatorState, r: ContactRequest, now: str) -> None:
    r.status, r.updated_at = "approved", now
    if _contact_between(state, r.from_id, r.to_id) is None:
        contact = Contact(id=ops.new_uuid(), a=r.from_id, b=r.to_id, inserted_at=now)
        state.contacts[contact.id] = contact


def _count(state: EmulatorState, party: str) -> tuple[int, int]:
    contacts = sum(1 for c in state.contacts.values() if party in (c.a, c.b))
    requests = sum(1 for r in state.contact_requests.values() if party in (r.from_id, r.to_id))
    return contacts, requests


@agent_api
async def add_contact(request: Request, platform: Platform, principal: Principal) -> Response:
    state, me, now = platform.state, principal.id, platform.now()
    fields = await body(request)
    handle = required_text(fields, "handle", "")
    message = optional_text(fields, "message", "")
    if message is not None and len(message) > MAX_MESSAGE:
        raise invalid("/message", f"should be at most {MAX_MESSAGE} character(s)")
    other = _by_handle(state, handle)
    if other == me:
        raise ApiFailure(400, "bad_request", "you cannot add yourself as a contact")
    if _contact_between(state, me, other) is not None:
        raise ApiFailure(409, "conflict", "already a contact")
    pending = [r for r in state.contact_requests.values() if r.status == "pending"]
    if any(r.from_id == me and r.to_id == other for r in pending):
        raise ApiFailure(409, "conflict", "a contact request to this handle is already pending")
    inverse = next((r for r in pending if r.from_id == other and r.to_id == me), None)
    if inverse is not None:
        _approve(state, inverse, now)
        platform.commit()
        return data({"id": inverse.id, "status": "approved"})
    for party in (me, other):
        contacts, requests = _count(state, party)
        if contacts >= MAX_CONTACTS or requests >= MAX_REQUESTS:
            raise invalid("/handle", "too many contacts or contact requests")
    new = ContactRequest(
        id=ops.new_uuid(), from_id=me, to_id=other, message=message, inserted_at=now, updated_at=now
    )
    state.contact_requests[new.id] = new
    platform.commit()
    return data({"id": new.id, "status": "pending"}, status=201)


def _find_request(
    state: EmulatorState, me: str, fields: dict[str, Any], action: str
) -> ContactRequest:
    request_id = optional_text(fields, "request_id", "")
    handle = optional_text(fields, "handle", "")
    if request_id:
        found = state.contact_requests.get(request_id)
        if found is None or me not in (found.from_id, found.to_id):
            raise not_found("contact request")
        received = found.to_id == me
        if received != (action != "cancel"):
            which = "you sent" if received else "you received"
            raise ApiFailure(403, "forbidden", f"cannot {action} a request {which}")
        return found
    if not handle:
        raise ApiFailure(400, "bad_request", "send handle or request_id")
    other = _by_handle(state, handle)
    pair = (other, me) if action != "cancel" else (me, other)
    matches = [r for r in state.contact_requests.values() if (r.from_id, r.to_id) == pair]
    if not matches:
        raise not_found("contact request")
    return next((r for r in matches if r.status == "pending"), matches[-1])


@agent_api
async def respond(request: Request, platform: Platform, principal: Principal) -> Response:
    state, now = platform.state, platform.now()
    fields = await body(request)
    action = fields.get("action")
    if action not in ACTIONS:
        raise invalid("/action", f"must be one of {', '.join(ACTIONS)}")
    found = _find_request(state, principal.id, fields, str(action))
    if found.status != "pending":
        raise ApiFailure(409, "conflict", f"the request is already {found.status}")
    if action == "approve":
        _approve(state, found, now)
    else:
        found.status, found.updated_at = ("rejected" if action == "reject" else "cancelled"), now
    platform.commit()
    return data({"id": found.id, "status": found.status})


@agent_api
async def remove_contact(request: Request, platform: Platform, principal: Principal) -> Response:
    state, me = platform.state, principal.id
    fields = await body(request)
    contact_id = optional_text(fields, "contact_id", "")
    handle = optional_text(fields, "handle", "")
    if not contact_id and not handle:
        raise ApiFailure(400, "bad_request", "send handle or contact_id")
    found = None
    if contact_id:
        found = state.contacts.get(contact_id) or _contact_between(state, me, contact_id)
        if found is not None and me not in (found.a, found.b):
            found = None
    elif handle:
        found = _contact_between(state, me, _by_handle(state, handle))
    if found is None:
        raise not_found("contact")
    del state.contacts[found.id]
    platform.commit()
    return data({"status": "removed"})


@agent_api
async def delegation_token(request: Request, platform: Platform, principal: Principal) -> Response:
    fields = await body(request)
    required_text(fields, "audience", "")
    message_id = required_text(fields, "message_id", "")
    message = platform.state.messages.get(message_id)
    if message is None or principal.id not in message.deliveries:  # delivered = mentioned
        raise not_found("message")
    raise ApiFailure(
        403,
        "no_delegation",
        "the message crossed no ownership boundary: its originator owns this agent",
    )


AG = "/api/v1/agent"
ROUTES = [
    Route(f"{AG}/contacts", list_contacts, methods=["GET"]),
    Route(f"{AG}/contacts/requests", list_requests, methods=["GET"]),
    Route(f"{AG}/contacts/add", add_contact, methods=["POST"]),
    Route(f"{AG}/contacts/remove", remove_contact, methods=["POST"]),
    Route(f"{AG}/contacts/requests/respond", respond, methods=["POST"]),
    Route(f"{AG}/delegation/token", delegation_token, methods=["POST"]),
]
