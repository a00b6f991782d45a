"""The reach phase: before the exec, wait (bounded) until the platform endpoints accept a
TCP connection, when the sandbox runtime asks for it (`BAND_KIT_ENDPOINT_WAIT_S`).

On a cluster an agent and its credential proxy are scheduled apart: a rescheduled agent
may start before the proxy's name resolves on its new node, or before a moved proxy
listens. Without a wait the agent fails its first connect, exits, and waits out a restart
delay and a container start each time. With one it starts the moment the way is open.
The wait only ever delays: when the deadline passes the agent starts anyway and fails or
connects on its own terms. Lines carry host and port only (a proxied URL's path holds the
box's access token).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

logger = logging.getLogger("launcher")

PROBE_TIMEOUT_S = 1.0
RETRY_S = 0.2
DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}

Connect = Callable[[tuple[str, int], float], object]


def _targets(urls: Iterable[str]) -> list[tuple[str, int]]:
    """Each distinct (host, port) of `urls`, in order; an unparseable URL is skipped (the
    config phase has already validated them)."""
    seen: list[tuple[str, int]] = []
    for url in urls:
        try:
            parts = urlsplit(url)
            port = parts.port or DEFAULT_PORTS.get(parts.scheme, 0)
        except ValueError:
            continue
        if parts.hostname and port and (parts.hostname, port) not in seen:
            seen.append((parts.hostname, port))
    return seen


def _probe(target: tuple[str, int], connect: Connect) -> str:
    """ "" when `target` accepts a connection, else why not (no secret in it)."""
    try:
        conn = connect(target, PROBE_TIMEOUT_S)
    except socket.gaierror as exc:
        return f"its name does not resolve ({exc.strerror})"
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    close = getattr(conn, "close", None)
    if callable(close):
        close()
    return ""


def wait_for_endpoints(
    urls: Iterable[str],
    wait_s: float,
    *,
    connect: Connect = socket.create_connection,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
) -> bool:
    """Wait up to `wait_s` seconds for every endpoint of `urls` to accept a connection;
    True when all did. `wait_s` 0 returns at once (no probe)."""
    if wait_s <= 0:
        return True
    began = clock()
    deadline = began + wait_s
    for host, port in _targets(urls):
        said = ""
        while why := _probe((host, port), connect):
            if why != said:
                logger.info("phase reach: waiting for %s:%d: %s", host, port, why)
                said = why
            if clock() >= deadline:
                logger.warning(
                    "phase reach: %s:%d still unreachable after %.0f s (%s); starting the "
                    "agent anyway",
                    host,
                    port,
                    wait_s,
                    why,
                )
                return False
            sleep(RETRY_S)
        if said:
            logger.info("phase reach: %s:%d answered after %.1f s", host, port, clock() - began)
    return True
