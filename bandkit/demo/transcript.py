"""The run's voice: every line goes to the terminal and to `<run_dir>/demo/transcript.txt`.

A line passes through the hide list first: any key the run knows is replaced by `***`
before it is shown or written (the conductor and the runtimes never print one; this is
the last guard). Then its control characters are escaped (`terminal.printable`): the
agents' messages and log tails are the sandboxes' text, and no escape sequence of theirs
reaches the terminal or the file. The file is 0600 and starts afresh for each run.

`terminal_only(line, note)` is for what must reach the person at the terminal and no
file: the presenter's one-time login link goes to the terminal, the file gets `note`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from bandkit.terminal import printable


class Transcript:
    def __init__(
        self, path: Path, out: Callable[[str], None], *, hide: tuple[str, ...] = ()
    ) -> None:
        self.path = path
        self._out = out
        self._hide = [secret for secret in hide if secret]
        self._file: IO[str] | None = None

    def __enter__(self) -> Self:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        self._file = os.fdopen(fd, "w", encoding="utf-8")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def hide(self, secret: str) -> None:
        """Never show `secret` from now on."""
        if secret and secret not in self._hide:
            self._hide.append(secret)

    def _hidden(self, line: str) -> str:
        for secret in self._hide:
            line = line.replace(secret, "***")
        return printable(line)  # the agents' words: no escape sequence of theirs is shown

    def __call__(self, line: str) -> None:
        line = self._hidden(line)
        self._out(line)
        self._write(line)

    def terminal_only(self, line: str, note: str) -> None:
        """Show `line` on the terminal; write only `note` to the transcript file."""
        self._out(self._hidden(line))
        self._write(self._hidden(note))

    def _write(self, line: str) -> None:
        if self._file is not None:
            self._file.write(line + "\n")
            self._file.flush()
