"""Read-only agent API paths the emulator has no data for: the platform's empty shapes.

The emulator keeps no contacts, memories or shared tasks, so the SDK's default tools
(`list_contacts`, `list_contact_requests`, `list_memories`, `get_memory`, `list_tasks`,
`get_task`, `get_task_history`) get an empty list in the exact Fern response shape
(band-client-rest 0.0.46: `ListAgentContactsResponse`, `ListAgentContactRequestsResponse`,
`ListAgentMemoriesResponse`, `ListChatTasksResponse`) instead of a 404 they would
surface as a tool error; a single memory or task is a plain 404. Writes (add/remove
contacts, store memories, create tasks, the board, files) stay unhandled and logged.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bandkit.emulator import ops
from bandkit.emulator.api import data, endpoint, int_query, paged
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import invalid, not_found

agent_api = endpoint(Kind.AGENT)
SENT_STATUSES = ("pending", "approved", "rejected", "cancelled", "all")
TASK_STATES = ("active", "cancelled", "superseded", "archived", "all")


def _page_meta(request: Request) -> dict[str, object]:
    _, meta = paged([], request, default_size=50)
    return {k: meta[k] for k in ("page", "page_size", "total_count", "total_pages")}


@agent_api
async def contacts(request: Request, platform: Platform, principal: Principal) -> Response:
    return data([], metadata=_page_meta(request))


@agent_api
async def contact_requests(request: Request, platform: Platform, principal: Principal) -> Response:
    sent_status = request.query_params.get("sent_status")
    if sent_status and sent_status not in SENT_STATUSES:
        raise invalid("/sent_status", f"must be one of {', '.join(SENT_STATUSES)}")
    meta = _page_meta(request)
    empty = {"total": 0, "total_pages": 0}
    return data(
        {"received": [], "sent": []},
        metadata={
            "page": meta["page"],
            "page_size": meta["page_size"],
            "received": empty,
            "sent": empty,
        },
    )


@agent_api
async def memories(request: Request, platform: Platform, principal: Principal) -> Response:
    meta = _page_meta(request)
    limit = int_query(request, "limit", int(str(meta["page_size"])), hi=1000)
    return data([], metadata={**meta, "has_more": False, "limit": limit})


@agent_api
async def memory(request: Request, platform: Platform, principal: Principal) -> Response:
    raise not_found("memory")


@agent_api
async def tasks(request: Request, platform: Platform, principal: Principal) -> Response:
    ops.room_for_agent(platform.state, request.path_params["room_id"], principal.id)
    state = request.query_params.get("state")
    if state and state not in TASK_STATES:
        raise invalid("/state", f"must be one of {', '.join(TASK_STATES)}")
    limit = int_query(request, "limit", 50, hi=100)
    return data([], metadata={"has_more": False, "limit": limit})


@agent_api
async def task(request: Request, platform: Platform, principal: Principal) -> Response:
    ops.room_for_agent(platform.state, request.path_params["room_id"], principal.id)
    raise not_found("task")


AG = "/api/v1/agent"
TASKS = f"{AG}/chats/{{room_id}}/tasks"
ROUTES = [
    Route(f"{AG}/contacts", contacts, methods=["GET"]),
    Route(f"{AG}/contacts/requests", contact_requests, methods=["GET"]),
    Route(f"{AG}/memories", memories, methods=["GET"]),
    Route(f"{AG}/memories/{{memory_id}}", memory, methods=["GET"]),
    Route(TASKS, tasks, methods=["GET"]),
    Route(f"{TASKS}/{{task_id}}", task, methods=["GET"]),
    Route(f"{TASKS}/{{task_id}}/history", task, methods=["GET"]),
]
