"""What both h11 proxies of a box share: their limits, refusals, byte copy and lifetime.

The egress proxy and the credential proxy both face a hostile sandbox that can open
connections and send half a request head forever: each refuses a head larger than
`HEAD_LIMIT`, drops a client whose head is not complete `HEAD_TIMEOUT_S` after it started
waiting for it, and refuses connections beyond `MAX_CLIENTS` open at once per box
(`ClientSlots`; a proxy process serves one box), so a box cannot exhaust the host's file
descriptors. A head either refuses is a `MalformedRequest`; short refusals are `answer`s.
Upstreams are reached with `open_upstream`, bytes relayed with `copy`, and a proxy
process runs `until_stopped`: SIGTERM, or its box directory gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
from collections.abc import Awaitable
from pathlib import Path
from typing import Protocol

HEAD_LIMIT = 64 * 1024  # a request head larger than this is refused
HEAD_TIMEOUT_S = 30.0  # a client that sends no complete head by then is dropped
MAX_CLIENTS = 256  # open connections per sandbox; more are refused (host fds are finite)
BUFFER = 64 * 1024  # the stream limit and the size of each read
ORPHAN_CHECK_S = 2.0  # how often a proxy checks that its box directory still exists


class MalformedRequest(Exception):
    """A request head a proxy refuses to parse: answered `status` (400 unless the head is
    too large for the credential proxy: 431) and the connection closed."""

    def __init__(self, message: str = "malformed request", status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class ClientSlots:
    """A counter of open client connections with a hard cap (no waiting: over the cap,
    `take` says no and the caller refuses the connection)."""

    def __init__(self, cap: int = MAX_CLIENTS) -> None:
        self.cap = cap
        self.open = 0

    def take(self) -> bool:
        if self.open >= self.cap:
            return False
        self.open += 1
        return True

    def give(self) -> None:
        self.open = max(0, self.open - 1)


def answer(status: int, reason: str, text: str) -> bytes:
    """A short plain-text answer that closes the connection."""
    body = (text + "\n").encode("utf-8", "replace")
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


async def open_upstream(
    host: str,
    port: int,
    timeout_s: float,
    context: ssl.SSLContext | None = None,
    via: tuple[str, int] | None = None,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to `host:port` (over TLS with `context`) within `timeout_s`; through
    the relay at `via` when given (TLS still verifies `host`)."""
    address, number = via or (host, port)
    return await asyncio.wait_for(
        asyncio.open_connection(
            address,
            number,
            ssl=context,
            server_hostname=host if context else None,
            limit=BUFFER,
        ),
        timeout_s,
    )


class Filter(Protocol):
    """Rewrites a byte stream piece by piece (`feed`) and gives what it held at the end."""

    def feed(self, data: bytes) -> bytes: ...

    def flush(self) -> bytes: ...


async def copy(
    src: asyncio.StreamReader,
    dst: asyncio.StreamWriter,
    *,
    first: bytes = b"",
    scrub: Filter | None = None,
) -> None:
    """Copy `first` (bytes already read) and then `src` to `dst` until `src` ends, through
    `scrub` when given (its held tail flushed at the end); errors propagate."""
    chunk = first
    while True:
        if chunk:
            dst.write(scrub.feed(chunk) if scrub else chunk)
            await dst.drain()
        chunk = await src.read(BUFFER)
        if not chunk:
            break
    if scrub is not None:
        dst.write(scrub.flush())


async def until_stopped(
    serving: Awaitable[None],
    box: Path,
    signals: tuple[signal.Signals, ...],
    *,
    needs: tuple[Path, ...] = (),
) -> None:
    """Run `serving` until it ends, one of `signals` arrives, `box` is no longer a
    directory (a safety net against leaks: the sandbox was removed without stopping the
    proxy) or one of the paths it `needs` is gone (the relay: its cluster's namespace);
    then cancel it."""
    task = asyncio.ensure_future(serving)
    loop = asyncio.get_running_loop()
    for sig in signals:
        loop.add_signal_handler(sig, task.cancel)
    while not task.done():
        await asyncio.wait([task], timeout=ORPHAN_CHECK_S)
        if not box.is_dir() or not all(os.path.lexists(path) for path in needs):
            task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
