"""Services a task starts and stops (the local platform, the LLM stub), both sides.

The background side (the `service` modules):

Each service is started by `spawn`, which records its pid before the service does
anything: the service waits for a go line on stdin (`GO_FLAG`, `await_go`), and the task
writes it only once `record(pid)` returned. A task killed in between (`kill -9` of
`demo.up` as it starts the platform, say) leaves no service behind: its end of the pipe
closes, the service reads the end of stdin and exits before it binds a port or reads its
state. So every service that runs is on record, and its teardown finds it.
Then three facts each service needs: whether a recorded pid still runs our module (a pid
is reused by the kernel, so the command line is checked, never the pid alone), the banner
a starting service prints once ready (`read_banner`), and a bounded stop (SIGTERM, wait
on a pidfd, then SIGKILL); and the end of its log (`tail`). The foreground side
(`python -m ...`): the listening socket, the uvicorn server driven phase by phase
(`Uvicorn`), signals wired to a graceful stop, the banner once ready, and the host part of
the URLs it prints.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol

from bandkit import processes
from bandkit.errors import BandkitError

if TYPE_CHECKING:
    import uvicorn

log = logging.getLogger("bandkit.daemons")

KILL_WAIT_S = 5.0
GO_FLAG = "--after-go"
GO = b"go\n"
EXIT_NO_GO = 3  # the service's exit code when its starter went away before the go


def spawn(
    argv: Sequence[str],
    *,
    log: IO[bytes],
    record: Callable[[int], None],
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start the service `argv` (`python -m <module> ...`, which takes `GO_FLAG`) in a
    session of its own, stdout piped for its banner and stderr to `log`; `record(pid)`
    runs before the service is let go. If `record` raises, the service is not let go: it
    exits, and the error propagates."""
    proc = subprocess.Popen(
        [*argv, GO_FLAG],
        bufsize=0,  # the go line is written at once (stdout is read with os.read)
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.PIPE,
        start_new_session=True,
        env=None if env is None else dict(env),
    )
    assert proc.stdin is not None
    try:
        record(proc.pid)
    except BaseException:
        proc.stdin.close()  # no go: it exits
        proc.wait(KILL_WAIT_S)
        raise
    with contextlib.suppress(BrokenPipeError):  # it exited already: `read_banner` says so
        proc.stdin.write(GO)
    proc.stdin.close()
    return proc


def add_go_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        GO_FLAG,
        action="store_true",
        help=(
            "wait for a go line on stdin before anything else, and exit if stdin ends "
            "first (what the task that starts this service in the background passes)"
        ),
    )


def await_go(what: str) -> bool:
    """The service's side of `spawn`: True once the go line came; False (and a line on
    stderr) when stdin ended first, because the task that started `what` is gone."""
    if sys.stdin.buffer.readline() == GO:
        return True
    print(f"{what}: the task that started it went away first; not starting", file=sys.stderr)
    return False


def runs_module(pid: int, module: str) -> bool:
    """True only if `pid` is alive and runs `python -m <module>`."""
    arguments = processes.cmdline(pid)
    return arguments is not None and module.encode() in arguments


READY_LINE = b"Ctrl-C to stop.\n"  # the banner's last line


def read_banner(
    proc: subprocess.Popen[bytes], timeout: float, *, what: str, error: type[BandkitError]
) -> list[str]:
    """The lines `proc` prints once ready (up to "Ctrl-C to stop."), within `timeout`;
    else `error` naming `what` (it never reported ready, or it exited first)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    fd = proc.stdout.fileno()
    while READY_LINE not in buffer:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(remaining, 0))
        if not ready:
            raise error(f"{what} did not report ready within {timeout:.0f}s")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise error(f"{what} exited during startup")
        buffer += chunk
    return buffer.decode("utf-8", errors="replace").splitlines()


def tail(path: Path, lines: int) -> str:
    """The last `lines` lines of `path` ("" when it cannot be read)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


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


def url_host(host: str) -> str:
    """`host` as the host part of a URL: a wildcard bind as loopback, IPv6 in brackets."""
    if host in ("0.0.0.0", ""):  # noqa: S104 - rendering, not binding
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


class Uvicorn:
    """One uvicorn server driven from our own loop: `start` on a socket we bound (so a busy
    port is our error, not uvicorn's `sys.exit`), `wait` until `stop()` (an event, never
    uvicorn's polling main loop), and a `shutdown` bounded by its timeout."""

    def __init__(self, log: logging.Logger) -> None:
        self.server: uvicorn.Server | None = None
        self._stop = asyncio.Event()
        self._log = log  # the server's own logger: its operator reads that one

    async def start(self, config: uvicorn.Config, sock: socket.socket) -> None:
        import uvicorn  # the services' background side imports this module without it

        server = uvicorn.Server(config)
        # What uvicorn's own `_serve` does before `startup` (we skip its main loop).
        config.load()
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[sock])
        self.server = server

    async def wait(self) -> None:
        await self._stop.wait()

    def stop(self) -> None:
        self._stop.set()

    def force(self) -> None:
        """Stop waiting for open connections during shutdown."""
        if self.server is not None:
            self.server.force_exit = True

    async def shutdown(self, timeout: float) -> None:
        """Stop uvicorn: its graceful shutdown, abandoned after `timeout` (+1 s)."""
        server = self.server
        if server is None:
            return
        server.config.timeout_graceful_shutdown = max(1, round(timeout))
        try:
            await asyncio.wait_for(server.shutdown(), timeout=timeout + 1.0)
        except TimeoutError:
            self._log.error("shutdown did not finish within %.1f s; leaving the rest", timeout)
        self.server = None


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
