"""Bulk deletions (`/api/v1/me/{chats,agents}/bulk-delete`, `/api/v1/me/bulk-deletions/{id}`).

The platform runs these as jobs that clients poll; here a job completes before the
response is sent, with one result per id in request order (`not_found` for unknown
ids), and stays readable until the emulator stops.
"""

from __future__ import annotations

import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bandkit.emulator import ops
from bandkit.emulator.api import body, data, endpoint
from bandkit.emulator.channels import Kind, Principal
from bandkit.emulator.context import Platform
from bandkit.emulator.errors import ApiFailure, invalid, not_found

human = endpoint(Kind.USER)
MAX_IDS = 100


def _ids(fields: dict[str, Any]) -> list[str]:
    ids = fields.get("ids")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise invalid("/ids", "must be a non-empty list of ids")
    if len(ids) > MAX_IDS:
        raise invalid("/ids", f"must list at most {MAX_IDS} ids")
    return ids


def _job(platform: Platform, kind: str, ids: list[str], force: bool) -> dict[str, Any]:
    now = platform.now()
    results: list[dict[str, Any]] = []
    for item in ids:
        try:
            if kind == "chat":
                platform.commit(ops.delete_room(platform.state, item))
            else:
                _, outcome = ops.delete_agent(platform.state, item, now)
                platform.commit(outcome)
                platform.broker.close_agent(item, 1008, "agent deleted")
            results.append({"id": item, "status": "succeeded"})
        except ApiFailure as failure:
            error = {"code": failure.code, "message": failure.message}
            results.append({"id": item, "status": "failed", "error": error})
    failed = sum(1 for r in results if r["status"] == "failed")
    job_id = str(uuid.uuid4())
    job: dict[str, Any] = {
        "id": job_id,
        "resource_type": kind,
        "force": force,
        "status": "completed",
        "total": len(ids),
        "processed": len(ids),
        "succeeded": len(ids) - failed,
        "failed": failed,
        "results": results,
        "inserted_at": now,
        "started_at": now,
        "completed_at": now,
    }
    platform.bulk_jobs[job_id] = job
    return job


@human
async def delete_chats(request: Request, platform: Platform, _: Principal) -> Response:
    fields = await body(request)
    return data(_job(platform, "chat", _ids(fields), False), status=202)


@human
async def delete_agents(request: Request, platform: Platform, _: Principal) -> Response:
    fields = await body(request)
    force = fields.get("force", False)
    if not isinstance(force, bool):
        raise invalid("/force", "must be a boolean")
    return data(_job(platform, "agent", _ids(fields), force), status=202)


@human
async def show(request: Request, platform: Platform, _: Principal) -> Response:
    job = platform.bulk_jobs.get(request.path_params["job_id"])
    if job is None:
        raise not_found("bulk deletion")
    return data(job)


ROUTES = [
    Route("/api/v1/me/chats/bulk-delete", delete_chats, methods=["POST"]),
    Route("/api/v1/me/agents/bulk-delete", delete_agents, methods=["POST"]),
    Route("/api/v1/me/bulk-deletions/{job_id}", show, methods=["GET"]),
]
