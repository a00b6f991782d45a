"""The room page as a chat, in headless Chromium: sign in with the login link, @mention
a running echo agent, see its reply; add an agent; no session is 401, a foreign Host 421."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from band.client.rest import AsyncRestClient

from bandkit.emulator.server import Emulator
from tests.emulator.support import (
    USER_KEY,
    AgentProcess,
    add,
    chromium,
    create_room,
    login_link,
    raw_client,
    register,
)
from tests.support.wait import until

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
WAIT_MS = 30_000


def _in_room(emu: Emulator, agent_id: str, room: str) -> Callable[[], bool]:
    def check() -> bool:
        assert emu.platform is not None
        sock = emu.platform.broker.agent_sockets.get(agent_id)
        return sock is not None and f"chat_room:{room}" in sock.topics

    return check


async def test_mention_a_running_echo_agent_and_see_its_reply(
    emu: Emulator,
    human: AsyncRestClient,
    echo_agents: Callable[..., AgentProcess],
    tmp_path: Path,
) -> None:
    echo = await register(human, "Echo Bot")
    helper = await register(human, "Helper")
    room = await create_room(human, "Chat room")
    await add(human, room, echo.id)
    process = echo_agents(echo, emu.rest_url, emu.ws_url)
    await until(_in_room(emu, echo.id, room), timeout=60, what="echo agent in the room")
    async with chromium() as browser:
        page = await browser.new_page()
        await page.goto(await login_link(emu.rest_url))
        await page.wait_for_url(f"{emu.rest_url}/", timeout=WAIT_MS)
        assert "#token" not in page.url
        await page.click(f'a[href="/rooms/{room}"]')
        await page.wait_for_function(
            "document.getElementById('status').textContent === 'live'", timeout=WAIT_MS
        )
        cookies = await page.context.cookies()
        assert [c["httpOnly"] for c in cookies] == [True]
        assert [c["sameSite"] for c in cookies] == ["Strict"]

        # Typing `@` lists the room's agents; choosing one inserts the mention.
        composer = page.locator("#text")
        await composer.click()
        await composer.press_sequentially("hello @Ec")
        option = page.locator("#mentions li", has_text="Echo Bot")
        await option.wait_for(state="visible", timeout=WAIT_MS)
        assert await page.locator("#mentions li").count() == 1  # Helper is not in the room
        await composer.press("Enter")
        assert await composer.input_value() == "hello @Echo Bot "
        await composer.press_sequentially("ping from the page")
        await composer.press("Enter")  # sends
        await page.wait_for_function(
            "[...document.querySelectorAll('.msg.user .content')]"
            ".some(e => e.textContent === 'hello @Echo Bot ping from the page')",
            timeout=WAIT_MS,
        )
        await page.wait_for_function(
            "[...document.querySelectorAll('.msg.agent .content')]"
            ".some(e => e.textContent.startsWith('echo: ')"
            " && e.textContent.endsWith('ping from the page'))",
            timeout=WAIT_MS,
        )
        assert await composer.input_value() == ""
        await page.wait_for_function(
            "document.querySelector('.msg.user .chip.processed') !== null", timeout=WAIT_MS
        )

        # "Add agent" lists the user's agents not in the room and adds one as a member.
        picker = page.locator("#add-agent")
        assert await picker.locator("option").all_inner_texts() == ["Helper"]
        await picker.select_option(label="Helper")
        await page.click("#add")
        await page.wait_for_function(
            "[...document.querySelectorAll('#people li')]"
            ".some(e => e.textContent === 'Helper (Agent)')",
            timeout=WAIT_MS,
        )
        await page.wait_for_function(
            "document.querySelector('#add-agent').textContent === 'no other agents'",
            timeout=WAIT_MS,
        )
        await composer.press_sequentially("@")
        await page.locator("#mentions li", has_text="Helper").wait_for(timeout=WAIT_MS)
        assert await page.locator("#mentions li").count() == 2
        await page.screenshot(path=str(tmp_path / "chat.png"))

    listed = await human.human_api_participants.list_my_chat_participants(chat_id=room)
    roles = {p.id: p.role for p in listed.data}
    assert roles[helper.id] == "member"
    async with raw_client(emu.rest_url) as client:
        listed_json = (await client.get(f"/api/v1/me/chats/{room}/messages")).json()["data"]
    sent = next(m for m in listed_json if m["sender_type"] == "User")
    assert [m["id"] for m in sent["metadata"]["mentions"]] == [echo.id]
    assert USER_KEY not in process.log()


async def test_a_blur_before_a_refocus_does_not_close_the_new_mention_menu(
    emu: Emulator, human: AsyncRestClient
) -> None:
    """Leaving the composer closes the @ menu 100 ms later; coming back within those
    100 ms and typing `@` must keep the new menu open (a stale close once hid it, and
    the mention test above then timed out). The page's clock is Playwright's fake one,
    so the 100 ms pass when the test says, not by luck."""
    agent = await register(human, "Echo Bot")
    room = await create_room(human, "Blur room")
    await add(human, room, agent.id)
    async with chromium() as browser:
        page = await browser.new_page()
        await page.clock.install()
        await page.goto(await login_link(emu.rest_url))
        await page.wait_for_url(f"{emu.rest_url}/", timeout=WAIT_MS)
        await page.goto(f"{emu.rest_url}/rooms/{room}")
        await page.wait_for_function(
            "[...document.querySelectorAll('#people li')]"
            ".some(e => e.textContent === 'Echo Bot (Agent)')",
            timeout=WAIT_MS,
        )
        await page.clock.pause_at(datetime.now(UTC) + timedelta(seconds=5))
        composer = page.locator("#text")
        await composer.focus()
        await page.locator("#add-agent").focus()  # the composer blurs: a close is due
        await composer.focus()
        await composer.press_sequentially("@")
        assert await page.locator("#mentions").is_visible()
        await page.clock.run_for(1000)  # past the close that was due
        assert await page.locator("#mentions").is_visible()
        assert await page.locator("#mentions li", has_text="Echo Bot").count() == 1
        await page.locator("#add-agent").focus()  # leaving for real still closes it
        await page.clock.run_for(1000)
        assert not await page.locator("#mentions").is_visible()


async def test_without_a_session_the_page_points_to_the_login_link(
    emu: Emulator, human: AsyncRestClient
) -> None:
    room = await create_room(human)
    link = await login_link(emu.rest_url)
    async with chromium() as browser:
        page = await browser.new_page()
        response = await page.goto(f"{emu.rest_url}/rooms/{room}")
        assert response is not None
        assert response.status == 401
        assert "login link" in await page.inner_text("body")
        feed = await page.evaluate(
            f"fetch('/rooms/{room}/feed').then(r => r.status)"  # no cookie: no feed either
        )
        assert feed == 401
        await page.goto(link)
        await page.wait_for_url(f"{emu.rest_url}/", timeout=WAIT_MS)
        again = await browser.new_page()  # the same link in another context: used up
        await again.goto(link)
        await again.wait_for_function(
            "document.body.innerText.includes('already used')", timeout=WAIT_MS
        )
        assert await again.context.cookies() == []


async def test_a_page_reached_by_a_foreign_host_name_is_misdirected(
    emu: Emulator, human: AsyncRestClient
) -> None:
    """What a DNS-rebinding page gets: its own name resolving to the emulator's address."""
    room = await create_room(human)
    port = emu.rest_url.rsplit(":", 1)[1]
    mapping = "--host-resolver-rules=MAP rebind.test 127.0.0.1"
    async with chromium(mapping, "--no-proxy-server") as browser:
        page = await browser.new_page()
        await page.goto(await login_link(emu.rest_url))
        await page.wait_for_url(f"{emu.rest_url}/", timeout=WAIT_MS)
        for path in (f"/rooms/{room}", "/", f"/rooms/{room}/feed"):
            response = await page.goto(f"http://rebind.test:{port}{path}")
            assert response is not None
            assert response.status == 421, path
            body = json.loads(await page.inner_text("body"))
            assert body["error"]["code"] == "misdirected_request"
