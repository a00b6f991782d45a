"""Ctrl-C and SIGTERM during a demo run: both interrupt the run, neither the teardown.

`interruptible` makes SIGTERM behave like Ctrl-C (a `KeyboardInterrupt` wherever the run
is), so one `except KeyboardInterrupt` leads every phase to the teardown. `shielded`
holds both signals off while the teardown runs, saying so once: an interrupted teardown
is what leaves resources behind. Outside the main thread (signals cannot be handled
there) both are no-ops.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Final

HANDLED_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def interruptible() -> Iterator[list[str]]:
    """SIGTERM raises KeyboardInterrupt; yields the names of the signals received."""
    received: list[str] = []
    if not _main_thread():
        yield received
        return

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        received.append(signal.Signals(signum).name)
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in HANDLED_SIGNALS}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextmanager
def shielded(log: Callable[[str], None]) -> Iterator[None]:
    """Ignore SIGINT and SIGTERM (noting them) until the block ends."""
    if not _main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        if not noted:
            log(
                f"teardown: {signal.Signals(signum).name} ignored until the teardown ends "
                "(if it is killed anyway, `uv run invoke demo.down` finishes the job)"
            )
        noted.append(signum)

    previous = {sig: signal.signal(sig, note) for sig in HANDLED_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
