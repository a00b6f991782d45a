"""Rooms a run makes on the platform, recorded in its manifest, and their remover.

A room entry is `Kind.ROOM` with key `<rest_url>#<title>` and details `url`, `title`
and, once the platform answered, `id`. `create_room` records it *before* creating
the room (so a crash in between leaves an entry, never an untracked room); titles
should be unique per run (the remover of an entry without an id looks the room up
by exact title and refuses to guess between several).

Deleting uses `DELETE /api/v1/me/chats/{id}` with the user key. The band-sdk REST
client (band_rest) has no call for it (only bulk deletion), so it goes through
httpx like upstream's `UserOps.delete_room`; create and list use band_rest. A 404
means the room is already gone, which is success.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from band_rest.human_api_chats.types.create_my_chat_room_request_chat import (
    CreateMyChatRoomRequestChat,
)

from bandkit.errors import BandkitError
from bandkit.kit.platform_api import MAX_PAGES, NO_RETRY, TooManyPages, client, paged
from bandkit.manifest import Kind, Manifest, Resource

DELETE_TIMEOUT_S = 30.0


class RoomError(BandkitError):
    """A room could not be created, found or deleted; the message never holds a key."""


def room_key(rest_url: str, title: str) -> str:
    return f"{rest_url}#{title}"


async def _create(api_key: str, rest_url: str, title: str) -> str:
    async with client(api_key, rest_url) as rest:
        response = await rest.human_api_chats.create_my_chat_room(
            chat=CreateMyChatRoomRequestChat(title=title), request_options=NO_RETRY
        )
    return str(response.data.id)


def create_room(
    manifest: Manifest,
    *,
    api_key: str,
    rest_url: str,
    title: str,
    platform: Mapping[str, str] | None = None,
) -> str:
    """Record, then create a room titled `title`; returns its id (also recorded).
    `platform`: what the record says about the platform (`platforms.PlatformRef.details`)."""
    entry = manifest.record(
        Kind.ROOM, room_key(rest_url, title), url=rest_url, title=title, **(platform or {})
    )
    room_id = asyncio.run(_create(api_key, rest_url, title))
    manifest.update(entry, id=room_id)
    return room_id


async def find_rooms_by_title(
    *, api_key: str, rest_url: str, title: str, since: Callable[[datetime], bool] | None = None
) -> list[str]:
    """Ids of every room of this user titled exactly `title` (created when `since` says)."""
    async with client(api_key, rest_url) as rest:

        def fetch(cursor: str | None, page: int | None) -> Any:
            return rest.human_api_chats.list_my_chats(
                cursor=cursor, page=page, request_options=NO_RETRY
            )

        try:
            return [
                str(room.id)
                async for room in paged(fetch)
                if room.title == title and (since is None or since(room.inserted_at))
            ]
        except TooManyPages:
            raise RoomError(
                f"more than {MAX_PAGES} pages of rooms; delete room {title!r} by hand"
            ) from None


def delete_room(*, api_key: str, rest_url: str, room_id: str) -> bool:
    """Delete a room; True when deleted now, False when it was already gone (404)."""
    url = f"{rest_url.rstrip('/')}/api/v1/me/chats/{room_id}"
    try:
        response = httpx.delete(url, headers={"X-API-Key": api_key}, timeout=DELETE_TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise RoomError(f"cannot reach {rest_url} to delete room {room_id}: {exc}") from None
    if response.status_code == 404:
        return False
    if response.is_success:
        return True
    raise RoomError(f"deleting room {room_id} failed: HTTP {response.status_code}")


CLOCK_SKEW = timedelta(minutes=10)


def made_after(recorded_at: str, inserted_at: datetime) -> bool:
    """True when a platform creation time is not before our record (minus the skew).

    A platform resource recorded without an id (the run stopped before the answer) is
    ours only if it was created after we recorded it, allowing for clock skew between this
    host and the platform.
    """
    if not recorded_at:
        return False
    recorded = datetime.strptime(recorded_at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    stamp = inserted_at if inserted_at.tzinfo else inserted_at.replace(tzinfo=UTC)
    return stamp >= recorded - CLOCK_SKEW


def room_remover(api_key: str) -> Callable[[Resource], None]:
    """The manifest remover for `Kind.ROOM` entries."""

    def remove(resource: Resource) -> None:
        url, title = resource.details["url"], resource.details.get("title", "")
        room_id = resource.details.get("id", "")
        if not room_id:  # recorded, then the run stopped before the platform answered
            # Ours only if made after we recorded it: an older same-titled room is kept.
            found = asyncio.run(
                find_rooms_by_title(
                    api_key=api_key,
                    rest_url=url,
                    title=title,
                    since=lambda at: made_after(resource.recorded_at, at),
                )
            )
            if len(found) > 1:
                raise RoomError(
                    f"{len(found)} rooms are titled {title!r} ({', '.join(found)}) and the "
                    "run never learned which one it made; delete it by hand, then re-run"
                )
            if not found:
                return
            room_id = found[0]
        delete_room(api_key=api_key, rest_url=url, room_id=room_id)

    return remove
