"""The room page in headless Chromium: a message posted through the API appears live."""

from __future__ import annotations

from pathlib import Path

import pytest
from band.client.rest import AsyncRestClient

from bandkit.emulator.server import Emulator
from tests.emulator.support import (
    add,
    chromium,
    create_room,
    login_link,
    mention,
    raw_client,
    register,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


async def test_message_appears_on_the_room_page_without_reload(
    emu: Emulator, human: AsyncRestClient, tmp_path: Path
) -> None:
    agent = await register(human)
    room = await create_room(human, "Demo room")
    await add(human, room, agent.id)
    await mention(human, room, agent, "already here")
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(await login_link(emu.rest_url))
        await page.wait_for_url(f"{emu.rest_url}/", timeout=15_000)
        await page.goto(f"{emu.rest_url}/rooms/{room}")
        await page.wait_for_function(
            "document.getElementById('status').textContent === 'live'", timeout=15_000
        )
        await page.wait_for_function(
            "[...document.querySelectorAll('.msg .content')]"
            ".some(e => e.textContent.endsWith('already here'))",
            timeout=15_000,
        )
        assert await page.title() == "Band emulator · Demo room"
        navigations: list[str] = []
        page.on("framenavigated", lambda frame: navigations.append(frame.url))
        await mention(human, room, agent, "posted while watching")
        async with raw_client(emu.rest_url, agent.key) as agent_http:
            thought = {"event": {"content": "weighing options", "message_type": "thought"}}
            await agent_http.post(f"/api/v1/agent/chats/{room}/events", json=thought)
        await page.wait_for_function(
            "[...document.querySelectorAll('.msg .content')]"
            ".some(e => e.textContent.endsWith('posted while watching'))",
            timeout=15_000,
        )
        await page.wait_for_function(
            "document.querySelector('.msg.event[data-type=thought] .content')"
            "?.textContent === 'weighing options'",
            timeout=15_000,
        )
        assert navigations == []  # updated in place, never reloaded
        await page.screenshot(path=str(tmp_path / "room.png"))
