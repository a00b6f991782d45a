"""The state file: load at startup, save after mutations with atomic writes.

A save writes a sibling temp file (0600), fsyncs it and `os.replace`s it over the
target, so a crash leaves either the old or the new state, never half of one. The
`Saver` coalesces bursts: mutations only mark it dirty, and one task writes the newest
snapshot whenever it is dirty; `flush()` writes synchronously at shutdown.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

from pydantic import ValidationError

from bandkit.emulator.errors import EmulatorError, Phase
from bandkit.emulator.state import EmulatorState
from bandkit.fsio import write_private

log = logging.getLogger("bandkit.emulator.state")


def load(path: Path) -> EmulatorState | None:
    """The saved state, or None when the file does not exist yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EmulatorError(Phase.STATE, f"cannot read state file {path}: {exc.strerror}") from None
    try:
        return EmulatorState.model_validate(json.loads(text))
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise EmulatorError(
            Phase.STATE,
            f"state file {path} is not a valid emulator state ({first}); "
            "move it away to start empty",
        ) from None


def check_writable(path: Path) -> None:
    """Fail at startup, not at the first save, when the state file cannot be written."""
    directory = path.parent if str(path.parent) else Path(".")
    if directory.exists() and not os.access(directory, os.W_OK):
        raise EmulatorError(Phase.STATE, f"state file directory is not writable: {directory}")
    if path.is_dir():
        raise EmulatorError(Phase.STATE, f"state file path is a directory: {path}")


class Saver:
    """Writes the state after changes; one writer task, newest snapshot wins."""

    def __init__(self, path: Path, state: EmulatorState) -> None:
        self.path = path
        self._state = state
        self._dirty = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="state-saver")

    def mark_dirty(self) -> None:
        self._dirty.set()

    def _snapshot(self) -> str:
        return self._state.model_dump_json(indent=1)

    async def _run(self) -> None:
        while True:
            await self._dirty.wait()
            self._dirty.clear()
            if self._closing:
                return
            text = self._snapshot()
            try:
                await asyncio.to_thread(write_private, self.path, text)
            except OSError as exc:
                log.error("could not save state to %s: %s", self.path, exc.strerror)

    async def stop(self) -> None:
        """Let the writer finish its current write (never two at once); write the last state."""
        if self._task is not None:
            self._closing = True
            self._dirty.set()
            await self._task
            self._task = None
        write_private(self.path, self._snapshot())
