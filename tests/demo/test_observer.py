"""RoomFeed on its own: pushes wake the reader, a socket that cannot open or drops turns
into polling at the interval (said once per change), and a reconnect turns it back."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from examples.docker_demo.observer import RoomFeed


class FakeSocket:
    """Stands in for the SDK's WebSocketClient; keeps the callbacks the feed passed."""

    def __init__(self, *_args: str, fail: bool = False, **callbacks: Any) -> None:
        self.callbacks = callbacks
        self.fail = fail
        self.on_created: Any = None
        self.closed = False

    async def __aenter__(self) -> FakeSocket:
        if self.fail:
            raise ConnectionRefusedError("no socket")
        return self

    async def __aexit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        self.closed = True

    async def join_chat_room_channel(self, chat_room_id: str, on_message_created: Any) -> None:
        self.on_created = on_message_created


def feed_with(lines: list[str], *, fail: bool = False) -> tuple[RoomFeed, list[FakeSocket]]:
    made: list[FakeSocket] = []

    def factory(*args: str, **callbacks: Any) -> FakeSocket:
        made.append(FakeSocket(*args, fail=fail, **callbacks))
        return made[-1]

    feed = RoomFeed(
        "ws://x", "key", "room-1", log=lines.append, poll_interval_s=0.05, factory=factory
    )
    return feed, made


async def test_a_push_wakes_the_reader_at_once() -> None:
    lines: list[str] = []
    feed, made = feed_with(lines)
    await feed.start()
    assert feed.live
    assert lines == [
        "observer: following the room over the WebSocket (pushes; polling every 0.05 s if it drops)"
    ]
    assert await feed.wait(0.05) is False  # a quiet tick while live: nothing to read
    asyncio.get_running_loop().call_later(0.05, asyncio.ensure_future, made[0].on_created({}))
    started = time.monotonic()
    assert await feed.wait(5.0) is True
    assert time.monotonic() - started < 1.0
    await feed.close()
    assert made[0].closed


async def test_no_socket_means_polling_and_says_so() -> None:
    lines: list[str] = []
    feed, _ = feed_with(lines, fail=True)
    await feed.start()
    assert not feed.live
    assert lines == [
        "observer: WebSocket unavailable (ConnectionRefusedError); polling the room every 0.05 s"
    ]
    assert await feed.wait(0.0) is True  # the fallback asks for a read right away
    started = time.monotonic()
    assert await feed.wait(10.0) is True  # then one at every poll interval
    assert time.monotonic() - started < 1.0
    assert feed.drops == 1


async def test_a_drop_and_a_reconnect_are_each_said_once() -> None:
    lines: list[str] = []
    feed, made = feed_with(lines)
    await feed.start()
    callbacks = made[0].callbacks
    await callbacks["on_disconnect"](None)
    await callbacks["on_disconnect"](None)
    assert not feed.live
    assert await feed.wait(10.0) is True
    await callbacks["on_reconnect"]()
    await callbacks["on_reconnect"]()
    assert feed.live
    assert lines[1:] == [
        "observer: WebSocket dropped; polling the room every 0.05 s",
        "observer: WebSocket back; following pushes again",
    ]


async def test_closing_is_not_a_drop() -> None:
    lines: list[str] = []
    feed, made = feed_with(lines)
    await feed.start()
    await feed.close()
    await made[0].callbacks["on_disconnect"](None)
    assert len(lines) == 1


async def test_polling_reads_at_the_interval_not_at_every_tick() -> None:
    lines: list[str] = []
    feed, _ = feed_with(lines, fail=True)
    feed.poll_interval_s = 0.3
    await feed.start()
    assert await feed.wait(0.02) is True  # the fallback asks for a read right away
    loop = asyncio.get_running_loop()
    read_at = loop.time()
    answers: list[bool] = []
    while not answers or answers[-1] is False:
        answers.append(await feed.wait(0.02))
    assert loop.time() - read_at >= 0.3  # no read before the interval passed
    assert len(answers) > 1  # quiet ticks in between
    assert set(answers[:-1]) == {False}
    feed.poke()
    assert await feed.wait(0.02) is True  # a poke still reads at once
