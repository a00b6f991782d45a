"""Shared builders for the demo tests: the cast registered on an in-process emulator, and
agents played by the test itself through the agent API (their own keys)."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx
from band_rest import AgentRegisterRequest, AsyncRestClient

from examples.docker_demo.cast import CAST, Role

USER_KEY = "canary-demo-user-key-5e1b7d"


@dataclass(frozen=True)
class Played:
    """An agent the test plays: its id and key."""

    role: Role
    id: str
    key: str = field(repr=False)


async def register_cast(rest_url: str) -> dict[Role, Played]:
    human = AsyncRestClient(api_key=USER_KEY, base_url=rest_url)
    cast: dict[Role, Played] = {}
    for role, member in CAST.items():
        response = await human.human_api_agents.register_my_agent(
            agent=AgentRegisterRequest(name=member.name, description=member.description)
        )
        cast[role] = Played(role, response.data.agent.id, response.data.credentials.api_key)
    return cast


async def say(rest_url: str, agent: Played, room: str, text: str, *to: Played) -> None:
    """Post `text` as `agent`, mentioning `to` (the agent API, as the SDK's tools do)."""
    body = {"message": {"content": text, "mentions": [{"id": a.id} for a in to]}}
    async with httpx.AsyncClient(base_url=rest_url, headers={"x-api-key": agent.key}) as c:
        response = await c.post(f"/api/v1/agent/chats/{room}/messages", json=body)
    response.raise_for_status()


class Ledger:
    """The conductor's room ledger, remembering what it was told."""

    def __init__(self) -> None:
        self.titles: list[str] = []
        self.room = ""

    def before_room(self, title: str) -> None:
        self.titles.append(title)

    def room_created(self, title: str, room_id: str) -> None:
        assert title == self.titles[-1]
        self.room = room_id
