"""The conductor's side of the room: the human API through the real ``band_rest`` client.

Everything the conductor does to the platform goes through ``RoomClient``: create the room,
add and list participants, post (with mentions by id and name) and read the latest text
messages, oldest first, as ``RoomMessage`` values. No retries here: the conductor's loop
reads again on its next tick, and a failed post surfaces as ``RoomCallError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from band_rest import (
    AsyncRestClient,
    ChatMessageRequest,
    ChatMessageRequestMentionsItem,
    ChatRoomRequest,
    ParticipantRequest,
)
from band_rest.core.api_error import ApiError

from examples.docker_demo.projection import RoomMessage, from_band_rest

READ_LIMIT: Final = 100  # the latest messages read per refresh (the conductor dedups by id)
TEXT: Final = "text"
ONE_ATTEMPT: Final[dict[str, Any]] = {"max_retries": 0}


class RoomCallError(Exception):
    """A call to the platform failed; the message names the call, never a key."""


@dataclass(frozen=True)
class Participant:
    id: str
    name: str
    type: str = "Agent"  # "Agent" or "User", as the platform spells it


class RoomClient:
    """One user's view of the platform's rooms (the presenter's key)."""

    def __init__(self, rest_url: str, api_key: str) -> None:
        self._rest = AsyncRestClient(api_key=api_key, base_url=rest_url.rstrip("/"))

    async def aclose(self) -> None:
        await self._rest._client_wrapper.httpx_client.httpx_client.aclose()

    async def create(self, title: str) -> str:
        response = await self._call(
            "create the room",
            self._rest.human_api_chats.create_my_chat_room(
                chat=ChatRoomRequest(title=title), request_options=ONE_ATTEMPT
            ),
        )
        return str(response.data.id)

    async def add(self, room_id: str, agent_id: str) -> None:
        await self._call(
            f"add participant {agent_id}",
            self._rest.human_api_participants.add_my_chat_participant(
                chat_id=room_id,
                participant=ParticipantRequest(participant_id=agent_id, role="member"),
                request_options=ONE_ATTEMPT,
            ),
        )

    async def participants(self, room_id: str) -> list[Participant]:
        response = await self._call(
            "list the participants",
            self._rest.human_api_participants.list_my_chat_participants(
                chat_id=room_id, request_options=ONE_ATTEMPT
            ),
        )
        return [Participant(str(p.id), str(p.name or ""), str(p.type)) for p in response.data or []]

    async def post(self, room_id: str, text: str, mentions: Sequence[Participant] = ()) -> str:
        """Post ``text`` mentioning ``mentions`` (each one a recipient); returns its id."""
        items = [ChatMessageRequestMentionsItem(id=m.id, name=m.name) for m in mentions]
        response = await self._call(
            "post a message",
            self._rest.human_api_messages.send_my_chat_message(
                chat_id=room_id,
                message=ChatMessageRequest(content=text, mentions=items),
                request_options=ONE_ATTEMPT,
            ),
        )
        return str(response.data.id)

    async def recent(self, room_id: str, limit: int = READ_LIMIT) -> list[RoomMessage]:
        """The latest text messages, oldest first (the platform lists newest first)."""
        response = await self._call(
            "read the messages",
            self._rest.human_api_messages.list_my_chat_messages(
                chat_id=room_id, limit=limit, message_type=TEXT, request_options=ONE_ATTEMPT
            ),
        )
        return [from_band_rest(item) for item in reversed(response.data or [])]

    @staticmethod
    async def _call(what: str, pending: Any) -> Any:
        try:
            return await pending
        except ApiError as exc:
            raise RoomCallError(f"{what}: the platform answered {exc.status_code}") from None
        except Exception as exc:  # httpx transport errors, parse errors
            raise RoomCallError(f"{what}: {type(exc).__name__}: {exc}") from None
