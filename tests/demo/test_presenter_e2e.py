"""The presenter's seat, as a person uses it: during the open floor of a `demo.up` (not
headless; stdin not a tty, so the room page is the only way in), headless Chromium follows
the one-time login link `demo.up` printed, lands on the meeting's room page, asks
`@Jordan (Architect)` a question, sees his reply appear, then posts "end meeting".
`demo.up` exits 0 with nothing left (`leftovers`). Meanwhile `demo.logs --follow`, started
from "another terminal" once the room opened, interleaves the three agents' logs with
their roles as prefixes and ends by itself with the run. No login token reaches a file
(transcript, manifest, run record, platform log), nor the canary user key any output.
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from bandkit.emulator import service
from tests.demo.leftovers import leftovers, secrets_in
from tests.demo.support import CANARY, Live, Platform, demo_env, live_invoke
from tests.emulator.support import chromium, token_of
from tests.support.wait import until

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
LINK = re.compile(r"(http://127\.0\.0\.1:\d+/login#token=[\w-]+&next=/rooms/(?P<room>[\w-]+))")
WAIT_MS = 30_000
QUESTION = "@Jordan (Architect) what would make you change the verdict?"
REPLY = "Good question. My VERDICT above stands"


def _link(run: Live, where: str) -> re.Match[str] | None:
    line = run.line_or_end(lambda t: t.startswith(f"demo.up: {where}") and "login#token=" in t)
    return None if line is None else LINK.search(line)


async def test_the_presenter_asks_on_the_open_floor_and_ends_the_meeting(
    platform: Platform,
) -> None:
    started = time.monotonic()
    where = ("--run-dir", str(platform.run_dir))
    env = demo_env(DEMO_OPEN_FLOOR_IDLE_S="120")
    run = live_invoke("demo.up", "--runtime", "local", "--scenario", "happy", *where, env=env)
    follow: Live | None = None
    try:
        opened = await until(
            lambda: _link(run, "watch and post"), timeout=120, what="the room's login link"
        )
        assert run.line(lambda t: "demo.logs --follow --run-dir" in t), run.output
        follow = live_invoke("demo.logs", "--follow", *where, env=demo_env())
        floor = await until(
            lambda: _link(run, "the floor is yours"), timeout=120, what="the floor's login link"
        )
        room = floor["room"]
        assert opened["room"] == room
        assert opened[1] != floor[1]
        assert run.line(lambda t: "end it early" in t and "end meeting" in t and "Ctrl-C" in t)
        async with chromium() as browser:
            page = await browser.new_page()
            await page.goto(floor[1])
            await page.wait_for_url(f"{platform.rest_url}/rooms/{room}", timeout=WAIT_MS)
            await page.wait_for_function(
                "document.getElementById('status').textContent === 'live'", timeout=WAIT_MS
            )
            composer = page.locator("#text")
            await composer.fill(QUESTION)
            await composer.press("Enter")
            await page.wait_for_function(
                "[...document.querySelectorAll('.msg.agent .content')]"
                f".some(e => e.textContent.includes({REPLY!r}))",
                timeout=WAIT_MS,
            )
            await composer.fill("Thank you all, that settles it. end meeting")
            await composer.press("Enter")
            code = await asyncio.to_thread(run.wait, 120)
        out = run.output
        assert code == 0, out
        assert f"presenter → Jordan (Architect): {QUESTION}" in out
        assert "Jordan (Architect) → presenter: Good question." in out
        assert "conductor: terminate_ok: presenter ended the meeting" in out
        assert "demo.up: verdict:" in out
        assert await asyncio.to_thread(follow.wait, 60) == 0, follow.output
    finally:
        run.kill()
        if follow is not None:
            follow.kill()
    print(f"presenter e2e: {time.monotonic() - started:.1f} s")
    followed = follow.output
    for role in ("pm", "dev", "architect"):
        assert re.search(rf"^{role} +\| .*demo agent ready", followed, re.M), followed[-3000:]
    assert re.search(r"^pm/launcher +\| ", followed, re.M), followed[-3000:]
    assert followed.splitlines()[-1] == "demo.logs: the run ended (its manifest is gone)"
    record = service.running(platform.run_dir)
    assert record is not None
    left = leftovers(platform.run_dir, keep_pids=(record.pid,))
    assert left == [], "\n".join(left)
    transcript = platform.layout.transcript.read_text()
    assert "presenter: a one-time login link to the room page was printed" in transcript
    tokens = [token_of(opened[1]), token_of(floor[1])]
    roots = (platform.run_dir, platform.layout.box_root)
    assert secrets_in(tokens, transcript, followed, roots=roots) == []
    assert secrets_in([CANARY], out, followed, roots=roots) == []
