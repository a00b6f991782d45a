"""A fault-injecting HTTP proxy in front of the emulator, for registration timeouts and
error answers. Every request gets a fresh connection (`Connection: close`)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

REGISTER = "/api/v1/me/agents/register"


@dataclass
class Faults:
    """What to do with requests: `hold_register` never forwards the registration;
    `drop_register_answer` forwards it but never answers; `hold_all_after_register` also
    holds every later request; `answer` = (status, body) replaces the registration."""

    hold_register: bool = False
    drop_register_answer: bool = False
    hold_all_after_register: bool = False
    answer: tuple[int, dict[str, object]] | None = None
    seen: list[str] = field(default_factory=list)
    _register_seen: bool = False


async def _handle(
    faults: Faults, host: str, port: int, r: asyncio.StreamReader, w: asyncio.StreamWriter
) -> None:
    try:
        head = await r.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        w.close()
        return
    method, path = head.split(b" ", 2)[:2]
    path_s = path.decode().split("?")[0]
    faults.seen.append(f"{method.decode()} {path_s}")
    is_register = path_s == REGISTER
    if (faults.hold_all_after_register and faults._register_seen) or (
        is_register and faults.hold_register
    ):
        faults._register_seen = faults._register_seen or is_register
        await asyncio.sleep(3600)
        return
    faults._register_seen = faults._register_seen or is_register
    if is_register and faults.answer is not None:
        status, body = faults.answer
        payload = json.dumps(body).encode()
        w.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
            + payload
        )
        await w.drain()
        w.close()
        return
    lines = [
        line
        for line in head.split(b"\r\n")
        if line and not line.lower().startswith((b"connection:", b"host:"))
    ]
    lines.insert(1, f"Host: {host}:{port}".encode())
    length = next(
        (
            int(line.split(b":", 1)[1])
            for line in lines
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    body = await r.readexactly(length) if length else b""
    up_r, up_w = await asyncio.open_connection(host, port)
    up_w.write(b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + body)
    await up_w.drain()
    answer = await up_r.read()  # the platform answers (and has committed the write)
    up_w.close()
    if is_register and faults.drop_register_answer:
        await asyncio.sleep(3600)  # ...but the client never hears it
        return
    w.write(answer)
    await w.drain()
    w.close()


@contextmanager
def fault_proxy(upstream: str, faults: Faults) -> Iterator[str]:
    """Serve on 127.0.0.1 in a thread; yields the proxy's base URL."""
    parts = urlsplit(upstream)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def start() -> None:
        server = await asyncio.start_server(
            lambda r, w: _handle(faults, parts.hostname or "", parts.port or 80, r, w),
            "127.0.0.1",
            0,
        )
        holder["server"] = server
        holder["port"] = server.sockets[0].getsockname()[1]
        ready.set()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{holder['port']}"
    finally:

        async def shutdown() -> None:
            server = holder["server"]
            assert isinstance(server, asyncio.base_events.Server)
            server.close()
            pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            loop.stop()

        asyncio.run_coroutine_threadsafe(shutdown(), loop)
        thread.join(10)
        loop.close()
