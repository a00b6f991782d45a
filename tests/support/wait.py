"""Polling, for every test: `wait_for` (blocking) and `until` (in an event loop).

Both call the check until it returns something truthy and return that value; after
`timeout` seconds they raise AssertionError naming `what` and the timeout.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def _timed_out(timeout: float, what: str) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def wait_for(predicate: Callable[[], T], timeout: float, what: str, step: float = 0.1) -> T:
    """Poll `predicate` every `step` seconds until truthy (its value is returned), or fail
    naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what)
        time.sleep(step)


async def until(
    check: Callable[[], T | Awaitable[T]],
    *,
    timeout: float = 10.0,
    what: str,
    step: float = 0.02,
) -> T:
    """`wait_for` without blocking the loop: `check` may be sync or async (awaited)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise _timed_out(timeout, what)
        await asyncio.sleep(step)
