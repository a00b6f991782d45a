"""The platform's human API as provisioning uses it, through the real `band_rest` client.

`register_agent` makes exactly one attempt (`max_retries: 0`: no idempotency key, and the
minted key is shown once), bounded by a client-side timeout. `find_agent_by_name` pages a
case-insensitive substring filter for an exact match (cursor paging where the platform
gives a cursor, page numbers otherwise). `describe_register_error` maps 403 and 422.

`PLATFORM_ERRORS` are what a call can end with when the network or the platform fails
(not this code): callers that tolerate a failed call catch those and say which it was
(`describe_failure`); anything else is a bug and surfaces with its traceback.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import httpx
from band_rest import AgentRegisterRequest, AsyncRestClient
from band_rest.core.api_error import ApiError
from band_rest.core.parse_error import ParsingError

from bandkit.errors import BandkitError

NO_RETRY: dict[str, Any] = {"max_retries": 0}
NAME_FIELDS = frozenset({"name", "/agent/name"})
MAX_PAGES = 100
# The network's (OSError, TimeoutError included; httpx's transport and protocol errors;
# a malformed URL) and the platform's answers (an error status, an unparseable body).
UNREACHABLE: tuple[type[Exception], ...] = (OSError, httpx.HTTPError, httpx.InvalidURL)
PLATFORM_ERRORS: tuple[type[Exception], ...] = (ApiError, ParsingError, *UNREACHABLE)


class RegistrationFailed(Exception):
    """The platform answered with an error; the message is for the user."""


class RegistrationTimeout(Exception):
    """No answer within the client-side timeout; the outcome is unknown."""


@asynccontextmanager
async def client(api_key: str, rest_url: str) -> AsyncIterator[AsyncRestClient]:
    rest = AsyncRestClient(api_key=api_key, base_url=rest_url.rstrip("/"))
    try:
        yield rest
    finally:
        await rest._client_wrapper.httpx_client.httpx_client.aclose()


def _details(body: Any) -> dict[str, list[str]]:
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    return details if isinstance(details, dict) else {}


def describe_register_error(status: int | None, body: Any) -> str:
    if status == 403:
        return (
            "the platform refused (403): the plan's agent cap is reached or this key may not "
            "register agents; delete an unused agent or use a register_only-scoped user key"
        )
    if status == 422:
        others = {k: v for k, v in _details(body).items() if k not in NAME_FIELDS}
        if others:
            problems = "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in others.items())
            return f"the platform rejected the registration (422): {problems}"
        return (
            "an agent with this name already exists (422); pick another --agent-name or --name "
            "(adopting an existing agent is not supported: its key was shown only once)"
        )
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    if message:
        return f"registration failed (HTTP {status}): {message}"
    return f"registration failed: HTTP {status}"


def describe_failure(exc: Exception) -> str:
    """One short line for one of `PLATFORM_ERRORS` (no headers; an error body's message)."""
    if isinstance(exc, ApiError | ParsingError):
        error = exc.body.get("error") if isinstance(exc.body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        return f"HTTP {exc.status_code}" + (f": {message}" if message else "")
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def register_agent(
    *, api_key: str, rest_url: str, name: str, description: str, timeout_s: float
) -> tuple[str, str]:
    """One registration attempt; returns (agent id, agent key)."""
    async with client(api_key, rest_url) as rest:
        try:
            response = await asyncio.wait_for(
                rest.human_api_agents.register_my_agent(
                    agent=AgentRegisterRequest(name=name, description=description),
                    request_options=NO_RETRY,
                ),
                timeout=timeout_s,
            )
        except TimeoutError:
            raise RegistrationTimeout(name) from None
        except (ApiError, ParsingError) as exc:  # ParsingError: an error body of another shape
            raise RegistrationFailed(describe_register_error(exc.status_code, exc.body)) from None
        except UNREACHABLE as exc:
            raise RegistrationFailed(f"cannot reach {rest_url}: {exc}") from None
    return str(response.data.agent.id), str(response.data.credentials.api_key)


@dataclass(frozen=True)
class FoundAgent:
    id: str
    description: str
    inserted_at: datetime


async def find_agent_by_name(*, api_key: str, rest_url: str, name: str) -> str | None:
    """The id of the agent named exactly `name`, or None after every page was read."""
    found = await find_agents_by_name(api_key=api_key, rest_url=rest_url, name=name)
    return found[0].id if found else None


class TooManyPages(BandkitError):
    """A listing went on past MAX_PAGES pages (a runaway cursor or a huge account)."""


async def paged(fetch: Callable[[str | None, int | None], Awaitable[Any]]) -> AsyncIterator[Any]:
    """Every item of a listing: cursor paging where the platform gives a cursor, page
    numbers otherwise, at most MAX_PAGES pages (then TooManyPages)."""
    cursor: str | None = None
    page = 1
    for _ in range(MAX_PAGES):
        response = await fetch(cursor, None if cursor else page)
        for item in response.data:
            yield item
        meta = response.metadata
        if not getattr(meta, "has_more", False):
            return
        cursor = getattr(meta, "next_cursor", None)
        page += 1
    raise TooManyPages(f"more than {MAX_PAGES} pages in one listing")


async def find_agents_by_name(*, api_key: str, rest_url: str, name: str) -> list[FoundAgent]:
    """Every agent named exactly `name` (id, description, creation time)."""
    async with client(api_key, rest_url) as rest:

        def fetch(cursor: str | None, page: int | None) -> Any:
            return rest.human_api_agents.list_my_agents(
                name=name, cursor=cursor, page=page, request_options=NO_RETRY
            )

        return [
            FoundAgent(str(a.id), str(a.description or ""), a.inserted_at)
            async for a in paged(fetch)
            if a.name == name
        ]


async def delete_agent(*, api_key: str, rest_url: str, agent_id: str) -> None:
    """Delete an agent (force); an agent that is already gone is success."""
    async with client(api_key, rest_url) as rest:
        try:
            await rest.human_api_agents.delete_my_agent(
                id=agent_id, force=True, request_options=NO_RETRY
            )
        except ApiError as exc:
            if exc.status_code != 404:
                raise
