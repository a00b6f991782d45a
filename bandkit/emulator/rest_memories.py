"""Agent memories (`/api/v1/agent/memories...`): store, list/search, read, supersede, archive.

What `Capability.MEMORY` calls (`band.runtime.tools.AgentTools.store_memory` and friends;
shapes: band-client-rest 0.0.46 `AgentMemory`, `ListAgentMemoriesResponse`).
Rules, from the Fern docstrings, narrowed to a platform with one user and no
organization:
- The caller is always the memory's source; an agent sees and changes only its own
  memories (anyone else's, and unknown ids, answer 404: existence is not revealed).
- `scope` defaults to `agent` (to `subject` when a `subject_id` is given); `subject`
  needs a `subject_id`; `organization` (store) and `memory_scope=org` (list) answer 422
  `org_scope_requires_organization`, the code the SDK turns into a retry hint.
- `system`/`type` must pair as `band_sdk_core` checks (sensory: iconic, echoic,
  haptic; working and long_term: episodic, semantic, procedural).
- Lists default to `status=active`; `content_query` is a case-insensitive substring
  match; `cursor`+`limit` (1..100, default 20) or `page`+`page_size` (max 50), not both.
- supersede/archive set the status (idempotent; the last one wins).
Limits: `MAX_MEMORIES_PER_AGENT` (422 beyond), content and thought `MAX_TEXT` characters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bandkit.emulator import ops
from bandkit.emulator.api import body, data, endpoint, int_query, optional_text, required_text
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import ApiFailure, invalid, not_found
from bandkit.emulator.state import EmulatorState, Memory

agent_api = endpoint(Kind.AGENT)

MAX_MEMORIES_PER_AGENT = 1000
MAX_TEXT = 10_000
ORG_REJECTED = "org_scope_requires_organization"
TYPES_BY_SYSTEM = {
    "sensory": ("iconic", "echoic", "haptic"),
    "working": ("episodic", "semantic", "procedural"),
    "long_term": ("episodic", "semantic", "procedural"),
}
SEGMENTS = ("user", "agent", "tool", "guideline")
SCOPES = ("agent", "subject", "organization")
STATUSES = ("active", "superseded", "archived")


def _org_rejected(pointer: str) -> ApiFailure:
    return ApiFailure(
        422,
        ORG_REJECTED,
        "organization scope requires the agent's owner to belong to an organization",
        {pointer: ["the agent's owner belongs to no organization"]},
    )


def render(m: Memory) -> dict[str, Any]:
    """`AgentMemory`."""
    return {
        "id": m.id,
        "content": m.content,
        "thought": m.thought,
        "system": m.system,
        "type": m.type,
        "segment": m.segment,
        "scope": m.scope,
        "subject_id": m.subject_id,
        "source_agent_id": m.source_agent_id,
        "organization_id": None,
        "status": m.status,
        "metadata": m.metadata,
        "inserted_at": m.inserted_at,
        "updated_at": m.updated_at,
    }


def _one_of(fields: dict[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = fields.get(key)
    if value not in allowed:
        raise invalid(f"/memory/{key}", f"must be one of {', '.join(allowed)}")
    return str(value)


def _text(fields: dict[str, Any], key: str) -> str:
    value = required_text(fields, key, "/memory")
    if len(value) > MAX_TEXT:
        raise invalid(f"/memory/{key}", f"should be at most {MAX_TEXT} character(s)")
    return value


def _metadata(fields: dict[str, Any]) -> dict[str, object]:
    raw = fields.get("metadata") or {}
    if not isinstance(raw, dict):
        raise invalid("/memory/metadata", "must be an object")
    out: dict[str, object] = {}
    for key in ("tags", "references"):
        items = raw.get(key)
        if items is None:
            continue
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise invalid(f"/memory/metadata/{key}", "must be a list of strings")
        if len(items) > 50 or any(len(i) > 200 for i in items):
            raise invalid(f"/memory/metadata/{key}", "at most 50 of at most 200 characters")
        out[key] = items
    return out


def create(state: EmulatorState, agent_id: str, fields: dict[str, Any], now: str) -> Memory:
    content, thought = _text(fields, "content"), _text(fields, "thought")
    system = _one_of(fields, "system", tuple(TYPES_BY_SYSTEM))
    kind = _one_of(fields, "type", TYPES_BY_SYSTEM[system])
    segment = _one_of(fields, "segment", SEGMENTS)
    subject_id = optional_text(fields, "subject_id", "/memory") or None
    scope = fields.get("scope") or ("subject" if subject_id else "agent")
    if scope not in SCOPES:
        raise invalid("/memory/scope", f"must be one of {', '.join(SCOPES)}")
    if scope == "organization":
        raise _org_rejected("/memory/scope")
    if scope == "subject" and not subject_id:
        raise invalid("/memory/subject_id", "is required for subject scope")
    if scope == "agent" and subject_id:
        raise invalid("/memory/subject_id", "must be empty for agent scope")
    mine = sum(1 for m in state.memories.values() if m.source_agent_id == agent_id)
    if mine >= MAX_MEMORIES_PER_AGENT:
        raise invalid("/memory", f"an agent keeps at most {MAX_MEMORIES_PER_AGENT} memories")
    memory = Memory(
        id=ops.new_uuid(),
        source_agent_id=agent_id,
        content=content,
        thought=thought,
        system=system,
        type=kind,
        segment=segment,
        scope=scope,
        subject_id=subject_id,
        metadata=_metadata(fields),
        inserted_at=now,
        updated_at=now,
    )
    state.memories[memory.id] = memory
    return memory


def own(state: EmulatorState, agent_id: str, memory_id: str) -> Memory:
    memory = state.memories.get(memory_id)
    if memory is None or memory.source_agent_id != agent_id:
        raise not_found("memory")
    return memory


def filtered(
    request: Request, candidates: list[Memory], *, check_scope: bool = True
) -> list[Memory]:
    """`candidates` that pass the list filters, newest first (status defaults to active);
    `check_scope=False` leaves `scope` to the caller (the human API's values differ)."""
    q = request.query_params
    filters: dict[str, tuple[str, ...]] = {"scope": (*SCOPES, "all")} if check_scope else {}
    filters |= {
        "status": (*STATUSES, "all"),
        "system": tuple(TYPES_BY_SYSTEM),
        "type": tuple(sorted({t for ts in TYPES_BY_SYSTEM.values() for t in ts})),
        "segment": SEGMENTS,
    }
    wanted: dict[str, str] = {}
    for key, allowed in filters.items():
        value = q.get(key)
        if value and value not in allowed:
            raise invalid(f"/{key}", f"must be one of {', '.join(allowed)}")
        if value and value != "all":
            wanted[key] = value
    if "status" not in wanted and q.get("status") != "all":
        wanted["status"] = "active"
    subject = q.get("subject_id")
    needle = (q.get("content_query") or "").casefold()
    found = [
        m
        for m in candidates
        if all(getattr(m, k) == v for k, v in wanted.items())
        and (not subject or m.subject_id == subject)
        and (not needle or needle in m.content.casefold())
    ]
    return sorted(found, key=lambda m: m.inserted_at, reverse=True)


def listing(request: Request, found: list[Memory], shape: Callable[[Memory], Any]) -> Response:
    """One page of `found`: `cursor`+`limit` (the default) or `page`+`page_size`."""
    q = request.query_params
    if ("page" in q or "page_size" in q) and ("cursor" in q or "limit" in q):
        raise invalid("/cursor", "do not mix cursor/limit with page/page_size")
    if "page" in q or "page_size" in q:
        page = int_query(request, "page", 1, hi=1_000_000)
        size = int_query(request, "page_size", 20, hi=50)
        pages = max(1, -(-len(found) // size))
        chunk = found[(page - 1) * size : page * size]
        meta: dict[str, object] = {
            "page": page,
            "page_size": size,
            "total_count": len(found),
            "total_pages": pages,
            "has_more": page < pages,
        }
        return data([shape(m) for m in chunk], metadata=meta)
    limit = int_query(request, "limit", 20, hi=100)
    cursor = q.get("cursor")
    if cursor:
        ids = [m.id for m in found]
        if cursor not in ids:
            raise invalid("/cursor", "is not a cursor this server issued")
        found = found[ids.index(cursor) + 1 :]
    chunk = found[:limit]
    meta = {"has_more": len(found) > limit, "limit": limit, "total_count": len(found)}
    if len(found) > limit:
        meta["next_cursor"] = chunk[-1].id
    return data([shape(m) for m in chunk], metadata=meta)


@agent_api
async def list_memories(request: Request, platform: Platform, principal: Principal) -> Response:
    memory_scope = request.query_params.get("memory_scope") or "me"
    if memory_scope == "org":
        raise _org_rejected("/memory_scope")
    if memory_scope != "me":
        raise invalid("/memory_scope", "must be me or org")
    mine = [m for m in platform.state.memories.values() if m.source_agent_id == principal.id]
    return listing(request, filtered(request, mine), render)


@agent_api
async def create_memory(request: Request, platform: Platform, principal: Principal) -> Response:
    fields = await body(request, "memory")
    memory = create(platform.state, principal.id, fields, platform.now())
    platform.commit()
    return data(render(memory), status=201)


@agent_api
async def get_memory(request: Request, platform: Platform, principal: Principal) -> Response:
    return data(render(own(platform.state, principal.id, request.path_params["memory_id"])))


def set_status(platform: Platform, memory: Memory, status: str) -> None:
    if memory.status != status:
        memory.status = status
        memory.updated_at = platform.now()
        platform.commit()


def _set_status(
    request: Request, platform: Platform, principal: Principal, status: str
) -> Response:
    memory = own(platform.state, principal.id, request.path_params["memory_id"])
    set_status(platform, memory, status)
    return data(render(memory))


@agent_api
async def supersede_memory(request: Request, platform: Platform, principal: Principal) -> Response:
    return _set_status(request, platform, principal, "superseded")


@agent_api
async def archive_memory(request: Request, platform: Platform, principal: Principal) -> Response:
    return _set_status(request, platform, principal, "archived")


MEM = "/api/v1/agent/memories"
ROUTES = [
    Route(MEM, list_memories, methods=["GET"]),
    Route(MEM, create_memory, methods=["POST"]),
    Route(f"{MEM}/{{memory_id}}", get_memory, methods=["GET"]),
    Route(f"{MEM}/{{memory_id}}/supersede", supersede_memory, methods=["POST"]),
    Route(f"{MEM}/{{memory_id}}/archive", archive_memory, methods=["POST"]),
]
