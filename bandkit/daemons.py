"""Services a task starts and stops (the local platform, the LLM stub), both sides.

The background side (the `service` modules):

Two facts each service needs: whether a recorded pid still runs our module (a pid is
reused by the kernel, so the command line is checked, never the pid alone), and a bounded
stop (SIGTERM, wait on a pidfd, then SIGKILL). The foreground side (`python -m ...`): the
listening socket, signals wired to a graceful stop, and the banner once ready.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

log = logging.getLogger("bandkit.daemons")

KILL_WAIT_S = 5.0


def runs_module(pid: int, module: str) -> bool:
    """True only if `pid` is alive and runs `python -m <module>`."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return module.encode() in cmdline


def stop(pid: int, *, timeout: float) -> str:
    """SIGTERM `pid`, wait up to `timeout`, then SIGKILL; says which it took."""
    pidfd = os.pidfd_open(pid)
    try:
        os.kill(pid, signal.SIGTERM)
        ready, _, _ = select.select([pidfd], [], [], timeout)
        if ready:
            return f"stopped pid {pid}"
        os.kill(pid, signal.SIGKILL)
        select.select([pidfd], [], [], KILL_WAIT_S)
        return f"killed pid {pid} after {timeout:.0f}s without a clean stop"
    finally:
        os.close(pidfd)


# -- the foreground side: what `python -m bandkit.emulator` / `bandkit.llm` share --------

HANDLED_SIGNALS = (
    signal.SIGINT,  # Ctrl-C: graceful stop; a second one shortens the grace to nothing
    signal.SIGTERM,  # `platform.down` / `llm.down`, service managers: graceful stop
)


class BindError(OSError):
    """The listening socket could not be made; the message says which address and why."""


class Serving(Protocol):
    ready: asyncio.Event

    async def serve(self) -> None: ...
    def stop(self) -> None: ...
    def force(self) -> None: ...


def listen(host: str, port: int, *, backlog: int) -> socket.socket:
    """Listen on host:port with a socket made from getaddrinfo's (family, type, proto).

    Its proto must say TCP: asyncio sets TCP_NODELAY only on accepted sockets whose proto
    is IPPROTO_TCP, and without it each response waits ~40 ms for a delayed ACK.
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(backlog)
        except OSError:
            sock.close()
            raise
    except (OSError, IndexError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise BindError(
            f"cannot listen on {host}:{port} ({reason}); pick another --port or --host"
        ) from None
    sock.setblocking(False)
    return sock


async def run_until_signalled(server: Serving) -> None:
    """`serve()` with HANDLED_SIGNALS wired to a graceful stop; handlers restored after."""
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def on_signal(sig: int) -> None:
        received.append(sig)
        if len(received) > 1:
            log.warning("second signal: not waiting for open connections")
            server.force()
        server.stop()

    for sig in HANDLED_SIGNALS:
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await server.serve()
    finally:
        for sig in HANDLED_SIGNALS:
            loop.remove_signal_handler(sig)


async def serve_and_announce(server: Serving, banner: Callable[[], list[str]]) -> None:
    """Serve until signalled; print the banner once the server is ready (if it gets there)."""
    runner = asyncio.create_task(run_until_signalled(server))
    ready = asyncio.create_task(server.ready.wait())
    await asyncio.wait({runner, ready}, return_when=asyncio.FIRST_COMPLETED)
    if server.ready.is_set():
        print_lines(banner())
    else:
        ready.cancel()
    await runner


def print_lines(lines: list[str]) -> None:
    """Print the banner; a reader that went away (a supervisor that read the URLs and
    closed the pipe) must not take the server down with it."""
    try:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
